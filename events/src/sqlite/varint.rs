//! LEB128 numbers, as the stored forms of chunk lists (`chunk_list.rs`) and split payloads
//! (`split.rs`) write them: seven bits a byte, low bits first, the top bit set on every byte
//! of a number but its last.

/// Appends `n`.
pub(super) fn write(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// The number at `*pos` in `bytes`, moving `*pos` past it, or what is wrong with it.
pub(super) fn read(bytes: &[u8], pos: &mut usize) -> Result<u64, &'static str> {
    let mut n = 0u64;
    let mut shift = 0u32;
    loop {
        let Some(&b) = bytes.get(*pos) else {
            return Err("ends inside a number");
        };
        if shift > 63 {
            return Err("has a number longer than 64 bits");
        }
        *pos += 1;
        n |= u64::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_and_the_form_is_pinned() {
        let mut out = Vec::new();
        for n in [0, 1, 127, 128, 300, u64::MAX] {
            write(n, &mut out);
        }
        assert_eq!(&out[..6], [0x00, 0x01, 0x7f, 0x80, 0x01, 0xac]);
        let mut pos = 0;
        let read: Vec<u64> = (0..6).map(|_| read(&out, &mut pos).unwrap()).collect();
        assert_eq!(read, [0, 1, 127, 128, 300, u64::MAX]);
        assert_eq!(pos, out.len());
        assert_eq!(super::read(&[0x80], &mut 0), Err("ends inside a number"));
        assert_eq!(
            super::read(&[0xff; 11], &mut 0),
            Err("has a number longer than 64 bits")
        );
    }
}
