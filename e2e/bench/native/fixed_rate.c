/*
 * fixed_rate: produce at a fixed rate with librdkafka and report the delivery latency
 * distribution — the benchmark's fixed-rate latency row (e2e/bench/README.md).
 *
 *   fixed_rate BOOTSTRAP TOPIC RATE COUNT SIZE [KEY=VALUE ...]
 *
 * Sends COUNT records of SIZE bytes at RATE records/s on an absolute schedule (record i is
 * due at start + i/RATE). A record's latency runs from the time it was *due* to its delivery
 * report, so a broker that stalls the producer is charged for the wait of every record that
 * queued behind the stall (no coordinated omission). KEY=VALUE pairs go to the producer's
 * configuration (acks, linger.ms, ...). The first 10 % of records are a warm-up and are left
 * out of the percentiles. Prints one JSON line; exits 1 when a record is not delivered.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdkafka.h"

static int64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t *latencies; /* by record index, microseconds; -1 = not delivered */
static int64_t start_us;
static double interval_us;
static long delivered, failed;
static char last_error[512];

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
        long i = (long)(intptr_t)m->_private;
        (void)rk;
        (void)opaque;
        if (m->err) {
                failed++;
                snprintf(last_error, sizeof last_error, "%s", rd_kafka_err2str(m->err));
                return;
        }
        int64_t due = start_us + (int64_t)(i * interval_us);
        latencies[i] = now_us() - due;
        delivered++;
}

static int by_value(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

static double pct_ms(const int64_t *sorted, long n, double p) {
        long at = (long)(p * (double)(n - 1) + 0.5);
        return (double)sorted[at] / 1000.0;
}

int main(int argc, char **argv) {
        if (argc < 6) {
                fprintf(stderr, "usage: %s BOOTSTRAP TOPIC RATE COUNT SIZE [KEY=VALUE ...]\n", argv[0]);
                return 2;
        }
        const char *topic = argv[2];
        double rate = atof(argv[3]);
        long count = atol(argv[4]);
        int size = atoi(argv[5]);
        if (rate <= 0 || count <= 0 || size < 0) {
                fprintf(stderr, "fixed_rate: RATE and COUNT must be positive, SIZE not negative\n");
                return 2;
        }
        char err[512];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) != RD_KAFKA_CONF_OK)
                goto bad_conf;
        for (int a = 6; a < argc; a++) {
                char *eq = strchr(argv[a], '=');
                if (!eq) {
                        fprintf(stderr, "fixed_rate: expected KEY=VALUE, got %s\n", argv[a]);
                        return 2;
                }
                *eq = '\0';
                if (rd_kafka_conf_set(conf, argv[a], eq + 1, err, sizeof err) != RD_KAFKA_CONF_OK)
                        goto bad_conf;
        }
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
        if (!rk) {
                fprintf(stderr, "fixed_rate: %s\n", err);
                return 1;
        }
        latencies = malloc(sizeof(int64_t) * (size_t)count);
        char *payload = malloc((size_t)size + 1);
        for (int k = 0; k < size; k++)
                payload[k] = (char)('a' + k % 26);
        for (long i = 0; i < count; i++)
                latencies[i] = -1;
        interval_us = 1e6 / rate;
        start_us = now_us();
        long next = 0;
        while (next < count) {
                int64_t now = now_us();
                /* Every record due by now goes out (a burst after a stall, as a real source's
                 * backlog would). */
                while (next < count && start_us + (int64_t)(next * interval_us) <= now) {
                        rd_kafka_resp_err_t e;
                        while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                                      RD_KAFKA_V_VALUE(payload, (size_t)size),
                                                      RD_KAFKA_V_OPAQUE((void *)(intptr_t)next),
                                                      RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                                rd_kafka_poll(rk, 1);
                        if (e) {
                                fprintf(stderr, "fixed_rate: produce failed: %s\n", rd_kafka_err2str(e));
                                return 1;
                        }
                        next++;
                }
                rd_kafka_poll(rk, 0);
                if (next < count) {
                        int64_t wait = start_us + (int64_t)(next * interval_us) - now_us();
                        if (wait > 1500) {
                                rd_kafka_poll(rk, (int)(wait / 1000) - 1);
                        } else if (wait > 0) {
                                struct timespec ts = {0, (long)(wait < 200 ? wait : 200) * 1000};
                                nanosleep(&ts, NULL);
                        }
                }
        }
        int64_t sent_us = now_us() - start_us;
        rd_kafka_flush(rk, 120 * 1000);
        long warm = count / 10;
        long n = 0;
        for (long i = warm; i < count; i++)
                if (latencies[i] >= 0)
                        latencies[n++] = latencies[i];
        printf("{\"records\": %ld, \"delivered\": %ld, \"failed\": %ld, \"rate_asked\": %.1f, "
               "\"rate_sent\": %.1f, \"measured\": %ld",
               count, delivered, failed, rate, (double)count * 1e6 / (double)sent_us, n);
        if (n > 0) {
                qsort(latencies, (size_t)n, sizeof(int64_t), by_value);
                printf(", \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f",
                       pct_ms(latencies, n, 0.50), pct_ms(latencies, n, 0.99), pct_ms(latencies, n, 0.999),
                       (double)latencies[n - 1] / 1000.0);
        }
        printf("}\n");
        if (failed || delivered < count)
                fprintf(stderr, "fixed_rate: %ld of %ld delivered, %ld failed (%s)\n", delivered, count,
                        failed, last_error);
        rd_kafka_destroy(rk);
        return (failed || delivered < count) ? 1 : 0;

bad_conf:
        fprintf(stderr, "fixed_rate: %s\n", err);
        return 2;
}
