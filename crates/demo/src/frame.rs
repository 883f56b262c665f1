//! Length-prefixed frames over a byte stream: a `u32` little-endian payload length, then the
//! payload.
//!
//! Both directions of every demo connection use this framing. A reader never trusts the length
//! blindly: a frame longer than [`MAX_FRAME_BYTES`] is refused before anything is allocated.

use std::io::{self, Read, Write};

/// The largest payload a frame may carry (16 MiB); a longer announced length is an error.
pub(crate) const MAX_FRAME_BYTES: usize = 16 << 20;

/// Bytes in the length prefix.
const HEADER_BYTES: usize = 4;

/// Writes `payload` as one frame, header and payload in a single `write_all` so a frame never
/// leaves as two small TCP segments.
pub(crate) fn write_frame(w: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    if payload.len() > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit", payload.len()),
        ));
    }
    let mut buf = Vec::with_capacity(HEADER_BYTES + payload.len());
    // The limit above keeps the length within u32.
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one frame.
///
/// Returns `Ok(None)` when the stream ends cleanly before a new frame starts (the peer closed the
/// connection between frames). A stream that ends inside a frame is `UnexpectedEof`; a length
/// over [`MAX_FRAME_BYTES`] is `InvalidData`. Both messages give the byte counts.
pub(crate) fn read_frame(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; HEADER_BYTES];
    let got = read_full(r, &mut header)?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("stream ended after {got} of {HEADER_BYTES} frame-header bytes"),
        ));
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame header announces {len} bytes, over the {MAX_FRAME_BYTES}-byte limit"),
        ));
    }
    let mut payload = vec![0u8; len];
    let got = read_full(r, &mut payload)?;
    if got < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("stream ended after {got} of {len} frame-payload bytes"),
        ));
    }
    Ok(Some(payload))
}

/// Fills `buf` as far as the stream allows; returns the bytes read (less than `buf.len()` only at
/// end of stream).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn frames_round_trip_back_to_back() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"hello").unwrap();
        write_frame(&mut wire, b"").unwrap();
        write_frame(&mut wire, &[7u8; 1000]).unwrap();
        assert_eq!(&wire[..4], &5u32.to_le_bytes());

        let mut r = Cursor::new(wire);
        assert_eq!(read_frame(&mut r).unwrap().unwrap(), b"hello");
        assert_eq!(read_frame(&mut r).unwrap().unwrap(), b"");
        assert_eq!(read_frame(&mut r).unwrap().unwrap(), vec![7u8; 1000]);
        assert!(read_frame(&mut r).unwrap().is_none(), "clean end of stream");
    }

    #[test]
    fn truncated_header_is_unexpected_eof() {
        let mut r = Cursor::new(vec![5u8, 0]);
        let err = read_frame(&mut r).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("2 of 4"), "{err}");
    }

    #[test]
    fn truncated_payload_is_unexpected_eof() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b"hello world").unwrap();
        wire.truncate(wire.len() - 3);
        let err = read_frame(&mut Cursor::new(wire)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("8 of 11"), "{err}");
    }

    #[test]
    fn oversized_length_is_refused_before_allocating() {
        let wire = u32::MAX.to_le_bytes().to_vec();
        let err = read_frame(&mut Cursor::new(wire)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
