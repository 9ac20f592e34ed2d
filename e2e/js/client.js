#!/usr/bin/env node
// kafkajs driver for the Skein e2e suite. Prints one JSON object on stdout, exit 0 on success.
//
//   node client.js SUBCOMMAND --bootstrap HOST:PORT [--option value ...]
//
//   create-topic   --topic T --partitions N
//   delete-topic   --topic T
//   list-topics
//   produce        --topic T --input FILE --out FILE [--compression none|gzip|snappy|lz4] [--acks -1|1]
//                  FILE lines: keyHex \t valueHex \t headers(name=hex;...|-) \t timestamp(|-)
//                  OUT: one JSON line per record {"i","p","o"}
//   offsets        --topic T --partition P --ts T1,T2
//                  earliest / latest (fetchTopicOffsets) and fetchTopicOffsetsByTimestamp per ts
//   consume-group  --topic T --group G --out FILE --expected N [--timeout-ms 90000]
//                  consumer group (needs the group coordinator); kafkajs has no manual assignment.
//   group-member   --topic T --group G --out FILE [--stop-file F] [--timeout-ms 120000]
//                  [--session-timeout-ms 6000] [--heartbeat-interval-ms 1000]
//                  one member of a consumer group (RoundRobin assigner, the only one kafkajs ships), autoCommit
//                  off: each batch is processed (written to OUT), then its offsets committed. OUT gets one JSON
//                  event per line, written synchronously (the member may be SIGKILLed at any time):
//                    {"t","ev":"assigned","parts":[..]}  {"t","ev":"rec","p","o","i"}
//                    {"t","ev":"commit","offsets":{"p":next}}  {"t","ev":"commit_failed","error"}
//                  Runs until the stop file exists or the timeout, then disconnects (leaves the group).
//
//   txn-produce    --topic T --tid ID --txns N --per-txn M [--abort-every K] [--offsets-group G --offsets-topic T2]
//                  N transactions of M records ("tX-rY"), every K-th aborted; with --offsets-group, each
//                  transaction also commits offset X+1 of partition 0 of T2 for group G (sendOffsets).
//                  Prints {"committed":C,"aborted":A}.
//
// zstd is not supported: the only kafkajs zstd codec (@kafkajs/zstd -> cppzst) fails to compile with Node 20.
'use strict';

const fs = require('fs');
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const LZ4 = require('kafkajs-lz4');

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = new (LZ4.default || LZ4)().codec;

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
};

function parseArgs(argv) {
  const cmd = argv[0];
  const opt = {};
  for (let i = 1; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    opt[argv[i].slice(2)] = argv[i + 1];
  }
  return { cmd, opt };
}

function req(opt, k) {
  if (opt[k] === undefined) throw new Error(`missing --${k}`);
  return opt[k];
}

function kafka(opt) {
  const config = {
    clientId: 'skein-e2e-js',
    brokers: [req(opt, 'bootstrap')],
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5 },
  };
  // Every subcommand takes [--sasl-mechanism plain|scram-sha-256|scram-sha-512 --sasl-username U
  // --sasl-password P] or [--sasl-mechanism oauthbearer --sasl-token-file F] (a JWT, read at each
  // authentication) and [--ssl-ca PEM] (TLS, the server checked against that CA).
  if (opt['sasl-mechanism'] === 'oauthbearer') {
    const file = req(opt, 'sasl-token-file');
    config.sasl = {
      mechanism: 'oauthbearer',
      oauthBearerProvider: async () => ({ value: fs.readFileSync(file, 'utf8').trim() }),
    };
  } else if (opt['sasl-mechanism'] !== undefined) {
    config.sasl = {
      mechanism: opt['sasl-mechanism'],
      username: req(opt, 'sasl-username'),
      password: req(opt, 'sasl-password'),
    };
  }
  if (opt['ssl-ca'] !== undefined) config.ssl = { ca: [fs.readFileSync(opt['ssl-ca'], 'utf8')] };
  return new Kafka(config);
}

const hex = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('hex'));

async function createTopic(opt) {
  const admin = kafka(opt).admin();
  await admin.connect();
  try {
    const ok = await admin.createTopics({
      topics: [{ topic: req(opt, 'topic'), numPartitions: Number(opt.partitions || 3), replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 30000,
    });
    return { created: opt.topic, ok };
  } finally {
    await admin.disconnect();
  }
}

async function deleteTopic(opt) {
  const admin = kafka(opt).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [req(opt, 'topic')], timeout: 30000 });
    return { deleted: opt.topic };
  } finally {
    await admin.disconnect();
  }
}

async function listTopics(opt) {
  const admin = kafka(opt).admin();
  await admin.connect();
  try {
    return { topics: (await admin.listTopics()).sort() };
  } finally {
    await admin.disconnect();
  }
}

function readInput(file) {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((line) => {
      const f = line.split('\t');
      const m = {
        key: f[0] === '-' ? null : Buffer.from(f[0], 'hex'),
        value: f[1] === '-' ? null : Buffer.from(f[1], 'hex'),
      };
      if (f[2] && f[2] !== '-') {
        m.headers = {};
        for (const h of f[2].split(';')) {
          const eq = h.indexOf('=');
          m.headers[h.slice(0, eq)] = Buffer.from(h.slice(eq + 1), 'hex');
        }
      }
      if (f[3] && f[3] !== '-') m.timestamp = f[3];
      return m;
    });
}

async function produce(opt) {
  const topic = req(opt, 'topic');
  const codec = opt.compression || 'none';
  if (!(codec in CODECS)) throw new Error(`kafkajs driver: unsupported compression ${codec}`);
  const msgs = readInput(req(opt, 'input'));
  const producer = kafka(opt).producer({ allowAutoTopicCreation: false, maxInFlightRequests: 1 });
  await producer.connect();
  const acked = [];
  try {
    // Send in chunks; kafkajs partitions keyed messages with the Java-compatible murmur2 partitioner.
    // One send() per chunk: results come back per partition as baseOffset, so we map the records of a
    // chunk to offsets by replaying the partitioner order (records of a partition keep their order).
    const chunk = 500;
    for (let start = 0; start < msgs.length; start += chunk) {
      const part = msgs.slice(start, start + chunk);
      const res = await producer.send({
        topic,
        messages: part,
        acks: Number(opt.acks || -1),
        compression: CODECS[codec],
        timeout: 30000,
      });
      for (const r of res) {
        if (r.errorCode !== 0) throw new Error(`produce error ${JSON.stringify(r)}`);
      }
      acked.push({ start, n: part.length, res });
    }
  } finally {
    await producer.disconnect();
  }
  fs.writeFileSync(req(opt, 'out'), acked.map((a) => JSON.stringify(a)).join('\n') + '\n');
  return { produced: msgs.length };
}

async function offsets(opt) {
  const admin = kafka(opt).admin();
  const topic = req(opt, 'topic');
  const partition = Number(req(opt, 'partition'));
  await admin.connect();
  try {
    const all = await admin.fetchTopicOffsets(topic);
    const mine = all.find((o) => o.partition === partition);
    const times = {};
    for (const t of (opt.ts || '').split(',').filter((x) => x)) {
      const r = await admin.fetchTopicOffsetsByTimestamp(topic, Number(t));
      const p = r.find((o) => o.partition === partition);
      times[t] = p ? Number(p.offset) : null;
    }
    return { earliest: Number(mine.low), latest: Number(mine.high), times };
  } finally {
    await admin.disconnect();
  }
}

async function consumeGroup(opt) {
  const topic = req(opt, 'topic');
  const expected = Number(req(opt, 'expected'));
  const timeoutMs = Number(opt['timeout-ms'] || 90000);
  const consumer = kafka(opt).consumer({ groupId: req(opt, 'group'), sessionTimeout: 10000, heartbeatInterval: 1000 });
  const out = fs.openSync(req(opt, 'out'), 'w');
  let count = 0;
  await consumer.connect();
  let crash = null;
  consumer.on(consumer.events.CRASH, (e) => {
    crash = e.payload.error;
  });
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timeout after ${timeoutMs} ms: consumed ${count} of ${expected}`)),
        timeoutMs,
      );
      // fail fast (with kafkajs' own error) when the consumer crashes instead of waiting for the timeout
      const poll = setInterval(() => {
        if (crash) {
          clearInterval(poll);
          clearTimeout(timer);
          reject(new Error(`kafkajs consumer crashed after ${count} records: ${crash.name}: ${crash.message}`));
        } else if (count >= expected) clearInterval(poll);
      }, 200);
      consumer
        .run({
          autoCommit: true,
          eachBatch: async ({ batch }) => {
            const lines = batch.messages.map((m) => {
              const h = Object.entries(m.headers || {}).map(([k, v]) => [k, hex(v)]);
              return JSON.stringify({
                p: batch.partition,
                o: Number(m.offset),
                k: hex(m.key),
                v: hex(m.value),
                h,
                ts: Number(m.timestamp),
              });
            });
            if (lines.length) fs.writeSync(out, lines.join('\n') + '\n');
            count += lines.length;
            if (count >= expected) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    fs.closeSync(out);
    await consumer.disconnect();
  }
  return { consumed: count };
}

async function groupMember(opt) {
  const topic = req(opt, 'topic');
  const timeoutMs = Number(opt['timeout-ms'] || 120000);
  const stopFile = opt['stop-file'];
  const { PartitionAssigners } = require('kafkajs');
  const consumer = kafka(opt).consumer({
    groupId: req(opt, 'group'),
    sessionTimeout: Number(opt['session-timeout-ms'] || 6000),
    heartbeatInterval: Number(opt['heartbeat-interval-ms'] || 1000),
    partitionAssigners: [PartitionAssigners.roundRobin],
    maxBytesPerPartition: 16384,
  });
  const out = fs.openSync(req(opt, 'out'), 'w');
  const ev = (o) => fs.writeSync(out, JSON.stringify({ t: Date.now(), ...o }) + '\n');
  let count = 0;
  let commitFailures = 0;
  let crash = null;
  consumer.on(consumer.events.CRASH, (e) => {
    crash = e.payload.error;
  });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
    ev({ ev: 'assigned', parts });
  });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, heartbeat }) => {
        if (!batch.messages.length) return;
        const lines = batch.messages.map((m) => {
          const v = m.value ? m.value.toString('latin1') : '';
          const i = v.length >= 9 && v[0] === 'v' && v[8] === '|' ? Number(v.slice(1, 8)) : null;
          return JSON.stringify({ t: Date.now(), ev: 'rec', p: batch.partition, o: Number(m.offset), i });
        });
        fs.writeSync(out, lines.join('\n') + '\n');
        count += lines.length;
        const next = (BigInt(batch.messages[batch.messages.length - 1].offset) + 1n).toString();
        try {
          await consumer.commitOffsets([{ topic, partition: batch.partition, offset: next }]);
          ev({ ev: 'commit', offsets: { [batch.partition]: Number(next) } });
        } catch (e) {
          commitFailures += 1;
          ev({ ev: 'commit_failed', error: `${e.name}: ${e.message}` });
          throw e;
        }
        await heartbeat();
      },
    });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (crash) throw new Error(`kafkajs consumer crashed after ${count} records: ${crash.name}: ${crash.message}`);
      if (stopFile && fs.existsSync(stopFile)) break;
      if (Date.now() > deadline) {
        process.stderr.write(`group-member: timeout after ${timeoutMs} ms, ${count} records\n`);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await consumer.disconnect();
    fs.closeSync(out);
  }
  return { consumed: count, commit_failures: commitFailures };
}

async function txnProduce(opt) {
  const producer = kafka(opt).producer({
    transactionalId: req(opt, 'tid'),
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 60000,
  });
  await producer.connect();
  const topic = req(opt, 'topic');
  const txns = Number(req(opt, 'txns'));
  const perTxn = Number(req(opt, 'per-txn'));
  const abortEvery = Number(opt['abort-every'] || 0);
  let committed = 0;
  let aborted = 0;
  try {
    for (let t = 0; t < txns; t++) {
      const txn = await producer.transaction();
      const messages = [];
      for (let r = 0; r < perTxn; r++) messages.push({ key: `k${r}`, value: `t${t}-r${r}` });
      await txn.send({ topic, messages });
      if (opt['offsets-group'] !== undefined) {
        await txn.sendOffsets({
          consumerGroupId: opt['offsets-group'],
          topics: [{ topic: req(opt, 'offsets-topic'), partitions: [{ partition: 0, offset: String(t + 1) }] }],
        });
      }
      if (abortEvery > 0 && (t + 1) % abortEvery === 0) {
        await txn.abort();
        aborted++;
      } else {
        await txn.commit();
        committed++;
      }
    }
  } finally {
    await producer.disconnect();
  }
  return { committed, aborted };
}

async function main() {
  const { cmd, opt } = parseArgs(process.argv.slice(2));
  const cmds = {
    'create-topic': createTopic,
    'delete-topic': deleteTopic,
    'list-topics': listTopics,
    produce,
    offsets,
    'consume-group': consumeGroup,
    'group-member': groupMember,
    'txn-produce': txnProduce,
  };
  if (!cmds[cmd]) throw new Error(`unknown subcommand ${cmd}`);
  const result = await cmds[cmd](opt);
  process.stdout.write(JSON.stringify(result) + '\n');
}

const hardTimeout = setTimeout(() => {
  process.stderr.write('client.js: hard timeout (180 s)\n');
  process.exit(3);
}, Number(process.env.E2E_JS_HARD_TIMEOUT_MS || 180000));
hardTimeout.unref();

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`error: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
