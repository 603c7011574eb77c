//! A minimal protobuf encoder (the wire format only): enough to write Perfetto `TracePacket`s
//! without a code generator. Field numbers live with their users ([`super::perfetto`]).

/// One message being encoded.
#[derive(Debug, Default, Clone)]
pub struct Msg {
    pub buf: Vec<u8>,
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

impl Msg {
    pub fn new() -> Msg {
        Msg::default()
    }

    fn tag(&mut self, field: u32, wire: u8) {
        put_varint(&mut self.buf, ((field as u64) << 3) | wire as u64);
    }

    /// uint32 / uint64 / enum / bool.
    pub fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.tag(field, VARINT);
        put_varint(&mut self.buf, v);
        self
    }

    /// int32 / int64 (two's complement, as protobuf encodes them).
    pub fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.uint(field, v as u64)
    }

    pub fn fixed64(&mut self, field: u32, v: u64) -> &mut Self {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.tag(field, FIXED64);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.tag(field, LEN);
        put_varint(&mut self.buf, b.len() as u64);
        self.buf.extend_from_slice(b);
        self
    }

    pub fn str(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    /// An embedded message.
    pub fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.buf)
    }

    /// An embedded message built by `f`.
    pub fn with(&mut self, field: u32, f: impl FnOnce(&mut Msg)) -> &mut Self {
        let mut m = Msg::new();
        f(&mut m);
        self.msg(field, &m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format() {
        let mut m = Msg::new();
        m.uint(1, 150);
        assert_eq!(m.buf, [0x08, 0x96, 0x01]);
        let mut m = Msg::new();
        m.str(2, "testing");
        assert_eq!(m.buf, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
        let mut m = Msg::new();
        m.int(1, -1);
        assert_eq!(m.buf.len(), 11);
        let mut m = Msg::new();
        m.fixed64(47, 1);
        assert_eq!(m.buf[..2], [0xF9, 0x02]);
    }
}
