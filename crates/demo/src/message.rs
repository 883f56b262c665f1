//! The demo's messages and their binary encoding.
//!
//! A message is a tag byte followed by its fields. Strings are a `u32` little-endian byte length
//! then UTF-8; integers are little-endian; a list is a `u32` count then its items. A request
//! frame's payload is an *envelope*:
//!
//! ```text
//! 0x00                                   no trace context (the sender was not tracing)
//! 0x01 <TraceContext::write_bytes form>  the sender's span context, with its request id
//! <request message>
//! ```
//!
//! A response frame's payload is just the response message. Decoding never panics: malformed
//! input is a [`CodecError`] naming the byte offset and what was expected there.

use std::fmt;

use ringtrace_core::propagation::TraceContext;

/// A request: client → master (`Put`, `Get`, `WordCount`) or master → worker (`Store`, `Fetch`,
/// `Map`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// Store `text` under `key`, replicated on two workers.
    Put {
        /// The block's key.
        key: String,
        /// The block's contents.
        text: String,
    },
    /// Read the block under `key` from a live replica.
    Get {
        /// The block's key.
        key: String,
    },
    /// Count the words of the blocks under `keys` and return the `top` most frequent.
    WordCount {
        /// The blocks to count over.
        keys: Vec<String>,
        /// How many of the most frequent words to return.
        top: u32,
    },
    /// Write one replica of a block to the worker's disk.
    Store {
        /// The block's key.
        key: String,
        /// The block's contents.
        text: String,
    },
    /// Read a block from the worker's disk.
    Fetch {
        /// The block's key.
        key: String,
    },
    /// Read a block from the worker's disk and count its words.
    Map {
        /// The block's key.
        key: String,
    },
}

/// A response to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Response {
    /// The request succeeded and has nothing to return.
    Ok,
    /// A block's contents (`Get`, `Fetch`).
    Block {
        /// The block's contents.
        text: String,
    },
    /// Word counts (`Map`: every word of a block; `WordCount`: the top words over all blocks).
    Counts {
        /// Words counted in total, over all blocks.
        total_words: u64,
        /// `(word, count)` pairs, most frequent first.
        words: Vec<(String, u64)>,
    },
    /// No block is stored under the key.
    NotFound {
        /// The missing key.
        key: String,
    },
    /// The request failed.
    Error {
        /// Why.
        message: String,
    },
}

const TAG_PUT: u8 = 0x01;
const TAG_GET: u8 = 0x02;
const TAG_WORD_COUNT: u8 = 0x03;
const TAG_STORE: u8 = 0x11;
const TAG_FETCH: u8 = 0x12;
const TAG_MAP: u8 = 0x13;

const TAG_OK: u8 = 0x80;
const TAG_BLOCK: u8 = 0x81;
const TAG_COUNTS: u8 = 0x82;
const TAG_NOT_FOUND: u8 = 0x83;
const TAG_ERROR: u8 = 0x84;

const NO_CONTEXT: u8 = 0x00;
const HAS_CONTEXT: u8 = 0x01;

impl Request {
    /// The operation's name, as it appears in the `rpc.method` span field.
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Request::Put { .. } => "PUT",
            Request::Get { .. } => "GET",
            Request::WordCount { .. } => "WORDCOUNT",
            Request::Store { .. } => "STORE",
            Request::Fetch { .. } => "FETCH",
            Request::Map { .. } => "MAP",
        }
    }

    /// Appends the message's encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Request::Put { key, text } => {
                out.push(TAG_PUT);
                put_str(out, key);
                put_str(out, text);
            }
            Request::Get { key } => {
                out.push(TAG_GET);
                put_str(out, key);
            }
            Request::WordCount { keys, top } => {
                out.push(TAG_WORD_COUNT);
                put_u32(out, keys.len() as u32);
                for k in keys {
                    put_str(out, k);
                }
                put_u32(out, *top);
            }
            Request::Store { key, text } => {
                out.push(TAG_STORE);
                put_str(out, key);
                put_str(out, text);
            }
            Request::Fetch { key } => {
                out.push(TAG_FETCH);
                put_str(out, key);
            }
            Request::Map { key } => {
                out.push(TAG_MAP);
                put_str(out, key);
            }
        }
    }

    /// Decodes a request that fills `buf` exactly.
    pub(crate) fn decode(buf: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(buf, 0);
        let req = Self::read(&mut r)?;
        r.finish()?;
        Ok(req)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, CodecError> {
        let at = r.pos;
        Ok(match r.u8("request tag")? {
            TAG_PUT => Request::Put { key: r.str("key")?, text: r.str("text")? },
            TAG_GET => Request::Get { key: r.str("key")? },
            TAG_WORD_COUNT => {
                let n = r.count("key count", 4)?;
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(r.str("key")?);
                }
                Request::WordCount { keys, top: r.u32("top")? }
            }
            TAG_STORE => Request::Store { key: r.str("key")?, text: r.str("text")? },
            TAG_FETCH => Request::Fetch { key: r.str("key")? },
            TAG_MAP => Request::Map { key: r.str("key")? },
            tag => return Err(CodecError::new(at, format!("a request tag, found 0x{tag:02x}"))),
        })
    }
}

impl Response {
    /// Appends the message's encoding to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Response::Ok => out.push(TAG_OK),
            Response::Block { text } => {
                out.push(TAG_BLOCK);
                put_str(out, text);
            }
            Response::Counts { total_words, words } => {
                out.push(TAG_COUNTS);
                put_u64(out, *total_words);
                put_u32(out, words.len() as u32);
                for (word, count) in words {
                    put_str(out, word);
                    put_u64(out, *count);
                }
            }
            Response::NotFound { key } => {
                out.push(TAG_NOT_FOUND);
                put_str(out, key);
            }
            Response::Error { message } => {
                out.push(TAG_ERROR);
                put_str(out, message);
            }
        }
    }

    /// The encoding as a new buffer (a response frame's payload).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    /// Decodes a response that fills `buf` exactly.
    pub(crate) fn decode(buf: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(buf, 0);
        let at = r.pos;
        let resp = match r.u8("response tag")? {
            TAG_OK => Response::Ok,
            TAG_BLOCK => Response::Block { text: r.str("text")? },
            TAG_COUNTS => {
                let total_words = r.u64("total word count")?;
                let n = r.count("word count", 12)?;
                let mut words = Vec::with_capacity(n);
                for _ in 0..n {
                    words.push((r.str("word")?, r.u64("count")?));
                }
                Response::Counts { total_words, words }
            }
            TAG_NOT_FOUND => Response::NotFound { key: r.str("key")? },
            TAG_ERROR => Response::Error { message: r.str("message")? },
            tag => return Err(CodecError::new(at, format!("a response tag, found 0x{tag:02x}"))),
        };
        r.finish()?;
        Ok(resp)
    }
}

/// Writes the trace-context part of a frame: a flag, then the context if any.
fn write_context(out: &mut Vec<u8>, ctx: Option<&TraceContext>) {
    match ctx {
        Some(ctx) => {
            out.push(HAS_CONTEXT);
            ctx.write_bytes(out);
        }
        None => out.push(NO_CONTEXT),
    }
}

/// Reads the trace-context part [`write_context`] writes, from the start of `buf`.
fn read_context<'a>(r: &mut Reader<'a>, buf: &'a [u8]) -> Result<Option<TraceContext>, CodecError> {
    Ok(match r.u8("trace-context flag")? {
        NO_CONTEXT => None,
        HAS_CONTEXT => {
            let start = r.pos;
            let (ctx, used) = TraceContext::read_bytes(&buf[start..])
                .map_err(|e| CodecError::new(start, format!("a trace context ({e})")))?;
            r.skip(used, "trace context")?;
            Some(ctx)
        }
        flag => return Err(CodecError::new(0, format!("a trace-context flag 0 or 1, found {flag}"))),
    })
}

/// Encodes a context frame's payload: the sender's trace context, if any (the frame a request
/// frame follows, read before the request's span exists).
pub(crate) fn encode_context(ctx: Option<&TraceContext>) -> Vec<u8> {
    let mut out = Vec::with_capacity(48);
    write_context(&mut out, ctx);
    out
}

/// Decodes a context frame's payload.
pub(crate) fn decode_context(buf: &[u8]) -> Result<Option<TraceContext>, CodecError> {
    let mut r = Reader::new(buf, 0);
    let ctx = read_context(&mut r, buf)?;
    r.finish()?;
    Ok(ctx)
}

/// Encodes a request frame's payload: the sender's trace context (if any), then the request.
pub(crate) fn encode_request(ctx: Option<&TraceContext>, req: &Request) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_context(&mut out, ctx);
    req.encode(&mut out);
    out
}

/// Decodes a request frame's payload into the sender's trace context and the request.
pub(crate) fn decode_request(buf: &[u8]) -> Result<(Option<TraceContext>, Request), CodecError> {
    let mut r = Reader::new(buf, 0);
    let ctx = read_context(&mut r, buf)?;
    let start = r.pos;
    let req = Request::decode(&buf[start..]).map_err(|e| CodecError { offset: start + e.offset, ..e })?;
    Ok((ctx, req))
}

/// A malformed message: where decoding stopped and what it expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CodecError {
    /// Byte offset into the payload.
    pub offset: usize,
    /// What was expected at `offset`.
    pub expected: String,
}

impl CodecError {
    fn new(offset: usize, expected: impl Into<String>) -> Self {
        Self { offset, expected: expected.into() }
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed message at byte {}: expected {}", self.offset, self.expected)
    }
}

impl std::error::Error for CodecError {}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}

/// A bounds-checked cursor over a payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], pos: usize) -> Self {
        Self { buf, pos }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CodecError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(CodecError::new(
                self.pos,
                format!("{what} ({n} bytes), but only {left} bytes remain"),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn skip(&mut self, n: usize, what: &str) -> Result<(), CodecError> {
        self.take(n, what).map(|_| ())
    }

    fn u8(&mut self, what: &str) -> Result<u8, CodecError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, CodecError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, CodecError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A list length, checked against the bytes left (each item takes at least `min_item_bytes`)
    /// so a corrupt count cannot make the decoder allocate without bound.
    fn count(&mut self, what: &str, min_item_bytes: usize) -> Result<usize, CodecError> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        let left = self.buf.len() - self.pos;
        if n.saturating_mul(min_item_bytes) > left {
            return Err(CodecError::new(
                at,
                format!("{what} that fits the remaining {left} bytes, found {n}"),
            ));
        }
        Ok(n)
    }

    fn str(&mut self, what: &str) -> Result<String, CodecError> {
        let len = self.u32(what)? as usize;
        let at = self.pos;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| CodecError::new(at + e.utf8_error().valid_up_to(), format!("UTF-8 {what}")))
    }

    fn finish(&self) -> Result<(), CodecError> {
        let left = self.buf.len() - self.pos;
        if left == 0 {
            Ok(())
        } else {
            Err(CodecError::new(self.pos, format!("end of message, found {left} more bytes")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringtrace_core::{SpanId, TraceId};

    fn requests() -> Vec<Request> {
        vec![
            Request::Put { key: "block-0001".into(), text: "ring trace ring\nspan".into() },
            Request::Get { key: "block-0001".into() },
            Request::WordCount { keys: vec!["a".into(), "b".into(), String::new()], top: 10 },
            Request::WordCount { keys: vec![], top: 0 },
            Request::Store { key: "k".into(), text: "héllo wörld".into() },
            Request::Fetch { key: "k".into() },
            Request::Map { key: "k".into() },
        ]
    }

    fn responses() -> Vec<Response> {
        vec![
            Response::Ok,
            Response::Block { text: "some text".into() },
            Response::Counts { total_words: 7, words: vec![("ring".into(), 4), ("span".into(), 3)] },
            Response::Counts { total_words: 0, words: vec![] },
            Response::NotFound { key: "nope".into() },
            Response::Error { message: "disk full".into() },
        ]
    }

    fn context() -> TraceContext {
        TraceContext {
            trace_id: TraceId::new(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736).unwrap(),
            span_id: SpanId::new(0x00f0_67aa_0ba9_02b7).unwrap(),
            sampled: true,
            request_id: Some("req-0007".into()),
        }
    }

    #[test]
    fn requests_round_trip() {
        for req in requests() {
            let mut buf = Vec::new();
            req.encode(&mut buf);
            assert_eq!(Request::decode(&buf).unwrap(), req);
        }
    }

    #[test]
    fn responses_round_trip() {
        for resp in responses() {
            assert_eq!(Response::decode(&resp.to_bytes()).unwrap(), resp);
        }
    }

    #[test]
    fn envelope_round_trips_with_and_without_context() {
        let ctx = context();
        for req in requests() {
            let (got_ctx, got_req) = decode_request(&encode_request(Some(&ctx), &req)).unwrap();
            let got_ctx = got_ctx.expect("context present");
            assert_eq!(got_ctx.trace_id, ctx.trace_id);
            assert_eq!(got_ctx.span_id, ctx.span_id);
            assert_eq!(got_ctx.sampled, ctx.sampled);
            assert_eq!(got_ctx.request_id, ctx.request_id);
            assert_eq!(got_req, req);

            let (none, got_req) = decode_request(&encode_request(None, &req)).unwrap();
            assert!(none.is_none());
            assert_eq!(got_req, req);
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let ctx = context();
        for req in requests() {
            let full = encode_request(Some(&ctx), &req);
            for cut in 0..full.len() {
                assert!(decode_request(&full[..cut]).is_err(), "{req:?} cut at {cut}");
            }
            let mut plain = Vec::new();
            req.encode(&mut plain);
            for cut in 0..plain.len() {
                assert!(Request::decode(&plain[..cut]).is_err(), "{req:?} cut at {cut}");
            }
        }
        for resp in responses() {
            let full = resp.to_bytes();
            for cut in 0..full.len() {
                assert!(Response::decode(&full[..cut]).is_err(), "{resp:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn errors_name_offset_and_expectation() {
        let err = Request::decode(&[TAG_GET, 10, 0, 0, 0, b'a']).unwrap_err();
        assert_eq!(err.offset, 5);
        assert!(err.to_string().contains("10 bytes"), "{err}");

        let err = Request::decode(&[0x7f]).unwrap_err();
        assert_eq!(err.offset, 0);
        assert!(err.expected.contains("0x7f"), "{err}");

        let err = decode_request(&[9]).unwrap_err();
        assert!(err.expected.contains("found 9"), "{err}");

        let mut trailing = Response::Ok.to_bytes();
        trailing.push(0);
        let err = Response::decode(&trailing).unwrap_err();
        assert_eq!(err.offset, 1);
    }

    #[test]
    fn bad_utf8_and_huge_counts_are_errors() {
        let err = Request::decode(&[TAG_GET, 2, 0, 0, 0, b'a', 0xff]).unwrap_err();
        assert_eq!(err.offset, 6);

        let mut buf = vec![TAG_WORD_COUNT];
        buf.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = Request::decode(&buf).unwrap_err();
        assert!(err.expected.contains("key count"), "{err}");
    }
}
