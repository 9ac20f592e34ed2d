package skein.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * KIP-932 share groups with kafka-clients' {@code KafkaShareConsumer} (e2e/tests/test_share_groups.py).
 *
 * <pre>
 * share-consume --bootstrap B --group G --topic T --max-records N --timeout-ms MS
 *               [--ack-mode implicit|explicit] [--release-every K] [--reject-every K]
 *               [--exit-without-ack-after N] [--client-id C] [--max-poll-records R]
 *               [--stop-file F] [--idle-ms D] [--drain-ms D] [--wall-clock true] [--hold-ms D]
 *               [--prop k=v ...]
 * </pre>
 *
 * Subscribes to T as a member of share group G and polls until N records were accepted (then, with
 * {@code --drain-ms}, goes on polling that long and handles what comes as before), the stop file
 * exists, nothing was delivered for {@code --idle-ms} after a first delivery, or the timeout.
 * Prints one JSON line per delivered record, flushed at once:
 * {@code {"p":partition,"o":offset,"k":key,"v":value,"dc":deliveryCount,"a":action,"t":ms}}, with action
 * {@code implicit} (implicit mode: accepted by the next poll / commitSync / close), {@code accept},
 * {@code release}, {@code reject} (explicit mode) or {@code none} (--exit-without-ack-after). With
 * {@code --wall-clock true} each record line also has {@code "w":epochMs} (the wall clock when it was
 * delivered, comparable between processes; {@code t} is ms since this process started) and
 * {@code "n":poll} (the number of the poll that delivered it, from 1), and a commitSync error line
 * the {@code "n"} of the poll whose acknowledgements it reports (explicit mode: none for a partition
 * means that poll's acknowledgements of it were committed). {@code --hold-ms D}: after each poll that
 * delivered records (and printing them), waits D ms before acknowledging them (explicit: before
 * commitSync; implicit: before the next poll), as an application that takes time over a batch.
 *
 * Explicit mode acknowledges every record of a poll before the next one: RELEASE every K-th delivered
 * record of the process with {@code --release-every K}, REJECT every K-th with {@code --reject-every K}
 * (REJECT wins when both apply), ACCEPT the rest; then {@code commitSync} (ShareAcknowledge). Each
 * commitSync partition error is printed as {@code {"ack_error":..,"p":..}}; errors the acknowledgement
 * commit callback reports (acks sent with a ShareFetch) likewise. At the end commitSync, close(), and a
 * summary line: {@code {"summary":true,"delivered":..,"accepted":..,"released":..,"rejected":..,
 * "ack_errors":..,"timed_out":bool,"stopped_by":"max-records|stop-file|idle|timeout","close_ms":..,
 * "first_record_ms":..}} (ms since the start; -1 when nothing came).
 *
 * {@code --exit-without-ack-after N}: acknowledges nothing and halts the JVM (Runtime.halt(0), no
 * close, no leave: the broker sees the connections drop) once N records were delivered, or at the end
 * of the first poll that delivered any if it brought fewer; prints {@code {"halted":true,"received":n}}
 * first. {@code --prop k=v} (repeatable) adds any consumer setting.
 *
 * <pre>
 * share-admin --bootstrap B --group G --action describe|delete-group|alter-offsets [--topic T --offsets P=O,P=O]
 * </pre>
 *
 * The Admin client's share-group calls, without the checks kafka-share-groups.sh makes first (its
 * --delete and --reset-offsets look at the group's state from ListGroups and refuse a non-empty group
 * themselves, so the broker's own refusal is seen only here). One JSON line: describe
 * {@code {"state":..,"group_epoch":..,"assignment_epoch":..,"members":[{"member_id","client_id","host",
 * "epoch","partitions":["t:p",..]}]}} (ShareGroupDescribe); delete-group (DeleteGroups) and alter-offsets
 * (AlterShareGroupOffsets) {@code {"ok":true}}; any failure {@code {"error":"ExceptionClass","message":..}}.
 */
final class Share {
    private Share() {
    }

    static void consume(String bootstrap, Map<String, String> opt, String[] rawArgs) throws Exception {
        long start = System.currentTimeMillis();
        String group = Client.req(opt, "group");
        String topic = Client.req(opt, "topic");
        long maxRecords = Long.parseLong(Client.req(opt, "max-records"));
        long timeoutMs = Long.parseLong(Client.req(opt, "timeout-ms"));
        String ackMode = opt.getOrDefault("ack-mode", "implicit");
        if (!ackMode.equals("implicit") && !ackMode.equals("explicit")) {
            Client.die("--ack-mode must be implicit or explicit");
        }
        long releaseEvery = Long.parseLong(opt.getOrDefault("release-every", "0"));
        long rejectEvery = Long.parseLong(opt.getOrDefault("reject-every", "0"));
        long exitAfter = Long.parseLong(opt.getOrDefault("exit-without-ack-after", "0"));
        long idleMs = Long.parseLong(opt.getOrDefault("idle-ms", "0"));
        long drainMs = Long.parseLong(opt.getOrDefault("drain-ms", "0"));
        Path stopFile = opt.containsKey("stop-file") ? Path.of(opt.get("stop-file")) : null;
        boolean wallClock = Boolean.parseBoolean(opt.getOrDefault("wall-clock", "false"));
        long holdMs = Long.parseLong(opt.getOrDefault("hold-ms", "0"));
        if ((releaseEvery > 0 || rejectEvery > 0) && !ackMode.equals("explicit")) {
            Client.die("--release-every / --reject-every need --ack-mode explicit");
        }
        boolean explicit = ackMode.equals("explicit") || exitAfter > 0;

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        if (opt.containsKey("client-id")) {
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, opt.get("client-id"));
        }
        if (opt.containsKey("max-poll-records")) {
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opt.get("max-poll-records"));
        }
        for (int i = 1; i + 1 < rawArgs.length; i += 2) {
            if (rawArgs[i].equals("--prop")) {
                String kv = rawArgs[i + 1];
                int eq = kv.indexOf('=');
                if (eq <= 0) {
                    Client.die("--prop needs k=v, not " + kv);
                }
                p.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }

        long delivered = 0;
        long accepted = 0;
        long released = 0;
        long rejected = 0;
        AtomicLong ackErrors = new AtomicLong();
        long firstRecordMs = -1;
        long lastDelivery = 0;
        long drainUntil = -1;
        long polls = 0;
        String stoppedBy = "timeout";
        long deadline = start + timeoutMs;

        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception e) -> {
            if (e != null) {
                ackErrors.incrementAndGet();
                StringBuilder parts = new StringBuilder();
                offsets.forEach((tip, offs) -> parts.append(parts.length() == 0 ? "" : ",")
                        .append("{\"p\":").append(tip.partition()).append(",\"offsets\":").append(offs.size()).append('}'));
                emit("{\"ack_error\":" + Client.q(e.toString()) + ",\"via\":\"callback\",\"parts\":[" + parts + "]}");
            }
        });
        c.subscribe(List.of(topic));
        while (true) {
            long now = System.currentTimeMillis();
            if (stopFile != null && Files.exists(stopFile)) {
                stoppedBy = "stop-file";
                break;
            }
            if (drainUntil >= 0 && now >= drainUntil) {
                stoppedBy = "max-records";
                break;
            }
            if (drainUntil < 0 && accepted >= maxRecords) {
                if (drainMs <= 0) {
                    stoppedBy = "max-records";
                    break;
                }
                drainUntil = now + drainMs;
            }
            if (idleMs > 0 && delivered > 0 && now - lastDelivery >= idleMs) {
                stoppedBy = "idle";
                break;
            }
            if (now >= deadline) {
                stoppedBy = "timeout";
                break;
            }
            ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
            if (recs.isEmpty()) {
                continue;
            }
            lastDelivery = System.currentTimeMillis();
            polls++;
            if (firstRecordMs < 0) {
                firstRecordMs = lastDelivery - start;
            }
            StringBuilder sb = new StringBuilder();
            for (ConsumerRecord<String, String> r : recs) {
                delivered++;
                String action;
                if (exitAfter > 0) {
                    action = "none";
                } else if (!explicit) {
                    action = "implicit";
                    accepted++;
                } else if (rejectEvery > 0 && delivered % rejectEvery == 0) {
                    c.acknowledge(r, AcknowledgeType.REJECT);
                    action = "reject";
                    rejected++;
                } else if (releaseEvery > 0 && delivered % releaseEvery == 0) {
                    c.acknowledge(r, AcknowledgeType.RELEASE);
                    action = "release";
                    released++;
                } else {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    action = "accept";
                    accepted++;
                }
                Optional<Short> dc = r.deliveryCount();
                sb.append("{\"p\":").append(r.partition()).append(",\"o\":").append(r.offset())
                        .append(",\"k\":").append(r.key() == null ? "null" : Client.q(r.key()))
                        .append(",\"v\":").append(r.value() == null ? "null" : Client.q(r.value()))
                        .append(",\"dc\":").append(dc.map(String::valueOf).orElse("null"))
                        .append(",\"a\":\"").append(action).append("\",\"t\":")
                        .append(System.currentTimeMillis() - start);
                if (wallClock) {
                    sb.append(",\"w\":").append(System.currentTimeMillis()).append(",\"n\":").append(polls);
                }
                sb.append("}\n");
                if (exitAfter > 0 && delivered >= exitAfter) {
                    break;
                }
            }
            System.out.print(sb);
            System.out.flush();
            if (exitAfter > 0) {
                emit("{\"halted\":true,\"received\":" + delivered + "}");
                Runtime.getRuntime().halt(0);
            }
            if (holdMs > 0) {
                Thread.sleep(holdMs);
            }
            if (ackMode.equals("explicit")) {
                commit(c, ackErrors, wallClock ? polls : -1);
            }
        }
        // Implicit mode: the last poll's records are accepted here; explicit: nothing is pending.
        commit(c, ackErrors, wallClock ? polls : -1);
        long closeStart = System.currentTimeMillis();
        c.close(Duration.ofSeconds(30));
        long closeMs = System.currentTimeMillis() - closeStart;
        emit("{\"summary\":true,\"delivered\":" + delivered + ",\"accepted\":" + accepted + ",\"released\":"
                + released + ",\"rejected\":" + rejected + ",\"ack_errors\":" + ackErrors.get() + ",\"timed_out\":"
                + stoppedBy.equals("timeout") + ",\"stopped_by\":\"" + stoppedBy + "\",\"close_ms\":" + closeMs
                + ",\"first_record_ms\":" + firstRecordMs + ",\"elapsed_ms\":" + (System.currentTimeMillis() - start)
                + "}");
    }

    static void admin(String bootstrap, Map<String, String> opt) throws Exception {
        String group = Client.req(opt, "group");
        String action = Client.req(opt, "action");
        try (Admin a = Client.admin(bootstrap)) {
            switch (action) {
                case "describe" -> {
                    ShareGroupDescription d = a.describeShareGroups(List.of(group)).describedGroups().get(group)
                            .get(30, TimeUnit.SECONDS);
                    List<String> members = new ArrayList<>();
                    for (ShareMemberDescription m : d.members()) {
                        List<String> parts = new ArrayList<>();
                        for (TopicPartition tp : m.assignment().topicPartitions()) {
                            parts.add(Client.q(tp.topic() + ":" + tp.partition()));
                        }
                        parts.sort(null);
                        members.add("{\"member_id\":" + Client.q(m.consumerId()) + ",\"client_id\":"
                                + Client.q(m.clientId()) + ",\"host\":" + Client.q(m.host()) + ",\"epoch\":"
                                + m.memberEpoch() + ",\"partitions\":[" + String.join(",", parts) + "]}");
                    }
                    emit("{\"state\":" + Client.q(String.valueOf(d.groupState())) + ",\"group_epoch\":"
                            + d.groupEpoch() + ",\"assignment_epoch\":" + d.targetAssignmentEpoch()
                            + ",\"members\":[" + String.join(",", members) + "]}");
                }
                case "delete-group" -> {
                    a.deleteShareGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
                    emit("{\"ok\":true}");
                }
                case "alter-offsets" -> {
                    String topic = Client.req(opt, "topic");
                    Map<TopicPartition, Long> offsets = new HashMap<>();
                    for (String po : Client.req(opt, "offsets").split(",")) {
                        String[] f = po.split("=");
                        offsets.put(new TopicPartition(topic, Integer.parseInt(f[0])), Long.parseLong(f[1]));
                    }
                    a.alterShareGroupOffsets(group, offsets).all().get(30, TimeUnit.SECONDS);
                    emit("{\"ok\":true}");
                }
                default -> Client.die("unknown --action " + action);
            }
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            emit("{\"error\":" + Client.q(c.getClass().getSimpleName()) + ",\"message\":"
                    + Client.q(String.valueOf(c.getMessage())) + "}");
        }
    }

    private static void commit(KafkaShareConsumer<String, String> c, AtomicLong ackErrors, long poll) {
        Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofSeconds(30));
        List<String> errs = new ArrayList<>();
        res.forEach((tip, err) -> err.ifPresent(e -> errs.add("{\"ack_error\":" + Client.q(e.toString())
                + ",\"via\":\"commitSync\",\"p\":" + tip.partition() + (poll >= 0 ? ",\"n\":" + poll : "")
                + "}")));
        for (String e : errs) {
            ackErrors.incrementAndGet();
            emit(e);
        }
    }

    private static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
