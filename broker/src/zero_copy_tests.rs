//! Tests of the zero-copy fetch path: the frames it writes are byte for
//! byte the plain encoding, with record bytes sent from their files.

use super::*;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::records::Compression;
use skein_storage::{Log, LogConfig};
use tokio::io::AsyncReadExt;

fn fetch_response(records: &[Bytes]) -> FetchResponse {
    let mut t = FetchableTopicResponse::default();
    for (i, r) in records.iter().enumerate() {
        let mut p = PartitionData::default();
        p.partition_index = i as i32;
        p.high_watermark = 42;
        p.records = Some(r.clone());
        t.partitions.push(p);
    }
    let mut f = FetchResponse::default();
    f.responses.push(t);
    f
}

/// The body as kafka-protocol encodes it into one buffer.
fn plain(resp: &FetchResponse, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    resp.encode(&mut out, version).unwrap();
    out.to_vec()
}

fn joined(chunks: &[Chunk]) -> Vec<u8> {
    chunks
        .iter()
        .flat_map(|c| c.to_bytes().unwrap().to_vec())
        .collect()
}

/// A log of `n` batches of one ~40 KiB record each.
fn log_of_large_batches(dir: &std::path::Path, n: usize) -> Log {
    let mut log = Log::open(dir, LogConfig::default(), 0).unwrap();
    for i in 0..n {
        let value = format!("{i:05}").repeat(8000);
        let r = skein_storage::testing::record(Some("k"), Some(&value), 0);
        let mut batch = skein_storage::testing::encode(&[r], Compression::None);
        log.append_as_leader(&mut batch, 0, 0, skein_storage::AppendOrigin::Client)
            .unwrap();
    }
    log
}

/// The chunked encoding is byte-for-byte the plain one, without copying
/// the large record sets.
#[test]
fn chunked_fetch_response_matches_plain_encoding() {
    let big1 = Bytes::from(vec![1u8; 10_000]);
    let big2 = Bytes::from(vec![2u8; 5000]);
    let small = Bytes::from(vec![3u8; 100]);
    let resp = fetch_response(&[big1.clone(), small, big2.clone(), Bytes::new()]);
    for version in [4i16, 11, 12, 13, 16, 17] {
        let chunks = encode_fetch(&resp, version, None).unwrap();
        assert_eq!(joined(&chunks), plain(&resp, version), "v{version}");
        let shared = |b: &Bytes| {
            chunks
                .iter()
                .any(|c| matches!(c, Chunk::Memory(m) if m.as_ptr() == b.as_ptr()))
        };
        assert!(shared(&big1) && shared(&big2));
    }
}

/// File slices registered while a fetch is handled are sent from their
/// file: the frame is the one the bytes in memory would have made.
#[tokio::test]
async fn file_slices_encode_as_the_bytes_they_stand_for() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of_large_batches(dir.path(), 6);
    for version in [4i16, 12, 17] {
        let outbox = Outbox::default();
        let (resp, want) = Outbox::scope(Some(outbox.clone()), async {
            assert!(active());
            let mut placed = Vec::new();
            let mut want = Vec::new();
            for offset in [0, 2, 5] {
                let r = log.read_records(offset, 100_000, 6, true).unwrap();
                assert!(matches!(r.records, Records::File(_)), "offset {offset}");
                want.push(r.records.clone().into_bytes().unwrap());
                placed.push(attach(r.records).unwrap());
            }
            // A small record set in memory between them.
            placed.insert(1, Bytes::from_static(b"not a slice"));
            want.insert(1, Bytes::from_static(b"not a slice"));
            (fetch_response(&placed), fetch_response(&want))
        })
        .await;
        let chunks = encode_fetch(&resp, version, Some(&outbox)).unwrap();
        let files = chunks
            .iter()
            .filter(|c| matches!(c, Chunk::File(_)))
            .count();
        assert_eq!(files, 3, "v{version}");
        assert_eq!(joined(&chunks), plain(&want, version), "v{version}");
    }
}

/// A placeholder the encoder never met would have gone out as zeros: the
/// encoding fails instead.
#[tokio::test]
async fn an_unmet_placeholder_fails_the_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of_large_batches(dir.path(), 2);
    let outbox = Outbox::default();
    let placeholder = Outbox::scope(Some(outbox.clone()), async {
        attach(log.read_records(0, 100_000, 2, true).unwrap().records).unwrap()
    })
    .await;
    assert!(placeholder.iter().all(|b| *b == 0));
    // The response carries a copy of the placeholder's bytes, not the
    // placeholder itself.
    let resp = fetch_response(&[Bytes::copy_from_slice(&placeholder)]);
    let err = encode_fetch(&resp, 12, Some(&outbox)).unwrap_err();
    assert!(err.to_string().contains("not met"), "{err}");
}

/// Without an outbox (a TLS connection, an internal caller) a slice is
/// copied into memory.
#[test]
fn without_an_outbox_a_slice_is_copied() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of_large_batches(dir.path(), 2);
    assert!(!active());
    let r = log.read_records(0, 100_000, 2, true).unwrap();
    let want = r.records.clone().into_bytes().unwrap();
    let got = attach(r.records).unwrap();
    assert_eq!(got, want);
    assert!(got.iter().any(|b| *b != 0));
}

/// `write_chunks` on a TCP socket sends memory chunks and file chunks in
/// order, with `sendfile` waiting for room when the peer reads slowly.
#[tokio::test]
async fn write_chunks_sends_files_over_tcp_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of_large_batches(dir.path(), 100);
    let slice = match log.read_records(0, 4 << 20, 100, true).unwrap().records {
        Records::File(f) => f,
        Records::Memory(_) => panic!("a 4 MiB read of large batches is a file slice"),
    };
    assert!(slice.len() > 3 << 20, "{} bytes", slice.len());
    let chunks = vec![
        Chunk::Memory(Bytes::from_static(b"head")),
        Chunk::File(slice.clone()),
        Chunk::Memory(Bytes::from_static(b"middle")),
        Chunk::Memory(Bytes::from_static(b"-")),
        Chunk::File(slice.clone()),
        Chunk::Memory(Bytes::from_static(b"tail")),
    ];
    let want = joined(&chunks);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 7000];
        loop {
            // A slow reader: the sender's socket buffer fills up.
            tokio::time::sleep(std::time::Duration::from_micros(50)).await;
            match s.read(&mut buf).await.unwrap() {
                0 => return got,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    let (_rd, mut wr) = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap()
        .into_split();
    assert!(wr.sends_files());
    write_chunks(&mut wr, &chunks).await.unwrap();
    wr.shutdown().await.unwrap();
    drop(wr);
    let got = reader.await.unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the bytes received differ from the chunks");
}

/// A file cut short after the read (a follower's truncation) cannot
/// complete the frame: the write fails rather than send a short frame.
#[tokio::test]
async fn a_file_cut_short_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = log_of_large_batches(dir.path(), 4);
    let Records::File(slice) = log.read_records(0, 1 << 20, 4, true).unwrap().records else {
        panic!("expected a file slice");
    };
    log.truncate_to(1).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    });
    let (_rd, mut wr) = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap()
        .into_split();
    let err = write_chunks(&mut wr, &[Chunk::File(slice)])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    drop(wr);
    let _ = reader.await;
}
