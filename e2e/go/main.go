// franz-go (github.com/twmb/franz-go), a pure-Go Kafka client, as a test driver of the e2e suite
// (e2e/tests/util.py: franz()). One command for now:
//
//	franz consume --bootstrap HOST:PORT --topic T --out FILE [--timeout-ms N]
//
// reads every partition of T from its earliest offset up to the end offsets it sees at the start
// and writes one JSON line per record ({"p":..,"o":..,"k":hex,"v":hex}); the last line on stdout
// is a JSON summary ({"count":N}). Exit 1 on a timeout or an error.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "consume" {
		fail("usage: franz consume --bootstrap HOST:PORT --topic T --out FILE [--timeout-ms N]")
	}
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	out := fs.String("out", "", "output JSONL file")
	timeoutMs := fs.Int("timeout-ms", 60000, "give up after this long")
	_ = fs.Parse(os.Args[2:])
	if *bootstrap == "" || *topic == "" || *out == "" {
		fail("--bootstrap, --topic and --out are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutMs)*time.Millisecond)
	defer cancel()

	seeds := strings.Split(*bootstrap, ",")
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		fail("client: %v", err)
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, *topic)
	admin.Close()
	if err != nil {
		fail("end offsets: %v", err)
	}
	want := map[int32]int64{}
	offsets := map[string]map[int32]kgo.Offset{*topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			fail("end offset of partition %d: %v", o.Partition, o.Err)
		}
		want[o.Partition] = o.Offset
		offsets[*topic][o.Partition] = kgo.NewOffset().AtStart()
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offsets))
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	f, err := os.Create(*out)
	if err != nil {
		fail("%v", err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	count := 0
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fail("timeout: read up to %v of %v", next, want)
		}
		fetches.EachError(func(t string, p int32, err error) {
			fail("fetch %s-%d: %v", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			_ = enc.Encode(map[string]any{"p": r.Partition, "o": r.Offset,
				"k": hex.EncodeToString(r.Key), "v": hex.EncodeToString(r.Value)})
			next[r.Partition] = r.Offset + 1
			count++
		})
	}
	fmt.Printf("{\"count\":%d}\n", count)
}
