/*
 * group_read: MEMBERS consumers in one consumer group read a topic to its end — the
 * benchmark's "many consumers in one group" row (e2e/bench/README.md).
 *
 *   group_read BOOTSTRAP TOPIC GROUP MEMBERS RECORDS [KEY=VALUE ...]
 *
 * Each member is its own librdkafka consumer (its own connections and group membership, as
 * separate processes would be) on its own thread; all subscribe at once. The run ends when
 * every record of the topic (RECORDS in all, written before) has been read by some member:
 * the highest offset read per partition is shared, so records read twice after a rebalance
 * count once. The time runs from the subscriptions to that moment, joins and rebalances
 * included. KEY=VALUE pairs go to every member's configuration. Prints one JSON line; exits 1
 * when the topic is not read to its end within 300 s.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdkafka.h"

#define MAX_PARTITIONS 4096

static const char *bootstrap, *topic, *group;
static char **extra;
static int n_extra;
static long total_records;
static _Atomic int64_t next_offset[MAX_PARTITIONS]; /* per partition: highest offset read + 1 */
static _Atomic long covered;                        /* sum of next_offset */
static _Atomic long long bytes_read;
static _Atomic int done;
static _Atomic long first_us;

static long now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static rd_kafka_t *member(void) {
        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        const char *base[][2] = {{"bootstrap.servers", bootstrap},
                                 {"group.id", group},
                                 {"auto.offset.reset", "earliest"},
                                 {"enable.auto.commit", "true"}};
        for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
                if (rd_kafka_conf_set(conf, base[i][0], base[i][1], err, sizeof err) != RD_KAFKA_CONF_OK)
                        goto bad;
        for (int i = 0; i < n_extra; i++) {
                char key[256];
                const char *eq = strchr(extra[i], '=');
                if (!eq || (size_t)(eq - extra[i]) >= sizeof key) {
                        snprintf(err, sizeof err, "expected KEY=VALUE, got %s", extra[i]);
                        goto bad;
                }
                memcpy(key, extra[i], (size_t)(eq - extra[i]));
                key[eq - extra[i]] = '\0';
                if (rd_kafka_conf_set(conf, key, eq + 1, err, sizeof err) != RD_KAFKA_CONF_OK)
                        goto bad;
        }
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
        if (rk)
                return rk;
bad:
        fprintf(stderr, "group_read: %s\n", err);
        exit(2);
}

static void *run_member(void *arg) {
        rd_kafka_t *rk = arg;
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(subs, topic, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, subs);
        rd_kafka_topic_partition_list_destroy(subs);
        if (e) {
                fprintf(stderr, "group_read: subscribe: %s\n", rd_kafka_err2str(e));
                exit(1);
        }
        while (!done) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
                if (!m)
                        continue;
                if (m->err) {
                        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                                fprintf(stderr, "group_read: %s\n", rd_kafka_message_errstr(m));
                } else if (m->partition >= 0 && m->partition < MAX_PARTITIONS) {
                        long zero = 0;
                        atomic_compare_exchange_strong(&first_us, &zero, now_us());
                        bytes_read += (long long)m->len;
                        int64_t seen = next_offset[m->partition], want = m->offset + 1;
                        while (want > seen &&
                               !atomic_compare_exchange_weak(&next_offset[m->partition], &seen, want))
                                ;
                        if (want > seen && (covered += (long)(want - seen)) >= total_records)
                                done = 1;
                }
                rd_kafka_message_destroy(m);
        }
        /* Members leave together (one at a time, each leave would wait for the others'
         * rebalance while they are not polling). */
        rd_kafka_consumer_close(rk);
        return NULL;
}

int main(int argc, char **argv) {
        if (argc < 6) {
                fprintf(stderr, "usage: %s BOOTSTRAP TOPIC GROUP MEMBERS RECORDS [KEY=VALUE ...]\n", argv[0]);
                return 2;
        }
        bootstrap = argv[1];
        topic = argv[2];
        group = argv[3];
        int members = atoi(argv[4]);
        total_records = atol(argv[5]);
        extra = argv + 6;
        n_extra = argc - 6;
        if (members <= 0 || total_records <= 0) {
                fprintf(stderr, "group_read: MEMBERS and RECORDS must be positive\n");
                return 2;
        }
        rd_kafka_t **rks = calloc((size_t)members, sizeof *rks);
        pthread_t *threads = calloc((size_t)members, sizeof *threads);
        for (int i = 0; i < members; i++)
                rks[i] = member();
        long start = now_us();
        for (int i = 0; i < members; i++)
                pthread_create(&threads[i], NULL, run_member, rks[i]);
        while (!done && now_us() - start < 300L * 1000000)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        long end = now_us();
        done = 1;
        for (int i = 0; i < members; i++)
                pthread_join(threads[i], NULL);
        double secs = (double)(end - start) / 1e6;
        long first = first_us ? first_us - start : -1;
        printf("{\"members\": %d, \"records\": %ld, \"covered\": %ld, \"bytes_read\": %lld, "
               "\"ms\": %.1f, \"first_record_ms\": %.1f}\n",
               members, total_records, (long)covered, (long long)bytes_read, secs * 1000,
               first >= 0 ? (double)first / 1000 : -1.0);
        fflush(stdout);
        for (int i = 0; i < members; i++)
                rd_kafka_destroy(rks[i]);
        if (covered < total_records) {
                fprintf(stderr, "group_read: read %ld of %ld records in 300 s\n", (long)covered, total_records);
                return 1;
        }
        return 0;
}
