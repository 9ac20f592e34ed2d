//! The field encodings of coordinator record keys and values, as Apache
//! Kafka writes them (its `CoordinatorRecordSerde`): the classic encoding
//! (`int16` lengths, `int32` array counts, -1 for null) and the flexible
//! one of KIP-482 (unsigned-varint lengths + 1, tagged fields). Shared by
//! the group coordinator's `log_format` (offsets and classic groups) and
//! `consumer_group_records` (KIP-848 groups), and the transaction
//! coordinator's `log_format`.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

/// Why a record could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct FormatError(pub(crate) String);

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

pub(crate) fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

pub(crate) fn put_bytes(b: &mut BytesMut, d: &[u8]) {
    b.put_i32(d.len() as i32);
    b.put_slice(d);
}

pub(crate) fn need(b: &Bytes, n: usize) -> Result<(), FormatError> {
    if b.remaining() < n {
        Err(FormatError(format!("truncated: need {n} bytes")))
    } else {
        Ok(())
    }
}

pub(crate) fn get_i16(b: &mut Bytes) -> Result<i16, FormatError> {
    need(b, 2)?;
    Ok(b.get_i16())
}

pub(crate) fn get_i32(b: &mut Bytes) -> Result<i32, FormatError> {
    need(b, 4)?;
    Ok(b.get_i32())
}

pub(crate) fn get_i64(b: &mut Bytes) -> Result<i64, FormatError> {
    need(b, 8)?;
    Ok(b.get_i64())
}

pub(crate) fn get_nullable_str(b: &mut Bytes) -> Result<Option<String>, FormatError> {
    let n = get_i16(b)?;
    if n < 0 {
        return Ok(None);
    }
    need(b, n as usize)?;
    let s = b.split_to(n as usize);
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| FormatError("string is not UTF-8".into()))
}

pub(crate) fn get_str(b: &mut Bytes) -> Result<String, FormatError> {
    Ok(get_nullable_str(b)?.unwrap_or_default())
}

pub(crate) fn get_bytes(b: &mut Bytes) -> Result<Bytes, FormatError> {
    let n = get_i32(b)?;
    if n < 0 {
        return Ok(Bytes::new());
    }
    need(b, n as usize)?;
    Ok(b.split_to(n as usize))
}

pub(crate) fn put_uvarint(b: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

pub(crate) fn put_compact_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => {
            put_uvarint(b, s.len() as u32 + 1);
            b.put_slice(s.as_bytes());
        }
        None => put_uvarint(b, 0),
    }
}

pub(crate) fn put_compact_str(b: &mut BytesMut, s: &str) {
    put_compact_nullable_str(b, Some(s));
}

pub(crate) fn put_no_tags(b: &mut BytesMut) {
    put_uvarint(b, 0);
}

/// A group coordinator record's key: `int16` record type (the key
/// version), `GroupId`, then `MemberId` where the record has one (classic,
/// non-flexible encoding).
pub(crate) fn group_record_key(version: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    put_str(&mut b, group);
    if let Some(m) = member {
        put_str(&mut b, m);
    }
    b.freeze()
}

pub(crate) fn flexible_value(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    f(&mut b);
    put_no_tags(&mut b);
    b.freeze()
}

pub(crate) fn get_uvarint(b: &mut Bytes) -> Result<u32, FormatError> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        need(b, 1)?;
        let x = b.get_u8();
        v |= ((x & 0x7f) as u32) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(FormatError("varint too long".into()))
}

pub(crate) fn get_compact_nullable_str(b: &mut Bytes) -> Result<Option<String>, FormatError> {
    let n = get_uvarint(b)?;
    if n == 0 {
        return Ok(None);
    }
    let n = (n - 1) as usize;
    need(b, n)?;
    let s = b.split_to(n);
    String::from_utf8(s.to_vec())
        .map(Some)
        .map_err(|_| FormatError("string is not UTF-8".into()))
}

pub(crate) fn get_compact_str(b: &mut Bytes) -> Result<String, FormatError> {
    Ok(get_compact_nullable_str(b)?.unwrap_or_default())
}

/// Array length of a compact array (null reads as empty).
pub(crate) fn get_compact_len(b: &mut Bytes) -> Result<usize, FormatError> {
    let n = get_uvarint(b)? as usize;
    let n = n.saturating_sub(1);
    // Every element takes at least one byte: a cheap sanity bound.
    need(b, n)?;
    Ok(n)
}

pub(crate) fn skip_tags(b: &mut Bytes) -> Result<(), FormatError> {
    let n = get_uvarint(b)?;
    for _ in 0..n {
        get_uvarint(b)?;
        let size = get_uvarint(b)? as usize;
        need(b, size)?;
        b.advance(size);
    }
    Ok(())
}

pub(crate) fn get_uuid(b: &mut Bytes) -> Result<Uuid, FormatError> {
    need(b, 16)?;
    let mut id = [0u8; 16];
    b.copy_to_slice(&mut id);
    Ok(Uuid::from_bytes(id))
}
