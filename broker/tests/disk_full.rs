//! A full disk: produce gets KAFKA_STORAGE_ERROR, the broker keeps serving,
//! nothing acknowledged is lost or corrupted, and writes resume once space
//! is free again. The data directory is a small tmpfs mounted for the test
//! (the test command runs as root; CI does).

mod common;

use std::process::Command;

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::records::Compression;

struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap().keep();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs to fill it and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_full_disk_gets_storage_errors_and_loses_nothing() {
    let fs = Tmpfs::mount("3m");
    let ballast = fs.0.join("ballast");
    std::fs::write(&ballast, vec![1u8; 1 << 20]).unwrap();
    let data = tempfile::Builder::new().tempdir_in(&fs.0).unwrap();
    let overrides = ["log.segment.bytes=262144"];
    let b = TestBroker::start_in(data, &overrides).await;
    let mut c = b.client().await;
    create_topic(&mut c, "fill", 1).await;

    // Fill the disk: acknowledged batches are counted until the first error.
    let mut acked = 0i64;
    let mut storage_errors = 0;
    for _ in 0..2000 {
        let r = produce(&mut c, "fill", 0, batch(100, Compression::None)).await;
        if r.error_code == 0 {
            assert_eq!(
                r.base_offset, acked,
                "acknowledged offsets must be contiguous"
            );
            acked += 100;
        } else {
            assert_eq!(r.error_code, ResponseError::KafkaStorageError.code());
            storage_errors += 1;
            if storage_errors >= 3 {
                break;
            }
        }
    }
    assert!(storage_errors >= 3, "the 3 MiB disk never filled up");
    assert!(acked > 0);

    // The broker still serves: everything acknowledged reads back intact.
    let mut offset = 0;
    while offset < acked {
        let f = fetch(&mut c, "fill", 0, offset, 0, 0).await;
        assert_eq!(f.error_code, 0);
        let recs = decode_records(f.records.unwrap());
        assert!(!recs.is_empty(), "stuck at offset {offset} of {acked}");
        let start = offset;
        for (o, _, _) in recs.into_iter().filter(|(o, _, _)| *o >= start) {
            assert_eq!(o, offset);
            offset += 1;
        }
    }
    assert_eq!(
        offset, acked,
        "high watermark and acknowledged records agree"
    );

    // The operator frees space (here: the ballast file); writes resume.
    std::fs::remove_file(&ballast).unwrap();
    let r = produce(&mut c, "fill", 0, batch(10, Compression::None)).await;
    assert_eq!(r.error_code, 0, "writes resume once space is free");
    assert_eq!(r.base_offset, acked);
    drop(c);

    // And a restart recovers a consistent log.
    let dir = b.stop().await;
    let b = TestBroker::start_in(dir, &overrides).await;
    let mut c = b.client().await;
    let f = fetch(&mut c, "fill", 0, acked, 0, 0).await;
    assert_eq!(f.error_code, 0);
    assert_eq!(f.high_watermark, acked + 10);
    assert_eq!(decode_records(f.records.unwrap()).len(), 10);
    b.stop().await;
}
