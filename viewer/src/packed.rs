//! Long lists kept packed until they are opened: the markup of a list of a long cast (each
//! `details.chunk` of 100 visits or prompts) is deflated (raw DEFLATE, RFC 1951) and stored as
//! base64 in the element's `data-z` attribute; the page's script inflates it with the
//! browser's `DecompressionStream("deflate-raw")` when the list is first opened (or before
//! printing). A page of a 50,000-event cast then holds a few hundred elements instead of
//! millions, and is a fraction of the size; a short cast's lists are plain markup.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, as `atob` reads it.
fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `markup` deflated and base64-encoded, for a `data-z` attribute.
pub fn packed(markup: &str) -> String {
    // Level 1: a long cast's lists are written in one pass, and the ratio barely improves.
    base64(&miniz_oxide::deflate::compress_to_vec(markup.as_bytes(), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unbase64(text: &str) -> Vec<u8> {
        let value = |c: u8| ALPHABET.iter().position(|a| *a == c).unwrap_or(0) as u32;
        let mut out = Vec::new();
        for quad in text.as_bytes().chunks(4) {
            let n = quad.iter().fold(0u32, |acc, c| (acc << 6) | value(*c));
            let pad = quad.iter().filter(|c| **c == b'=').count();
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        out
    }

    #[test]
    fn base64_pads_as_atob_expects() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn packed_markup_inflates_to_itself() {
        let markup = "<li>ü &lt;x&gt;</li>".repeat(500);
        let packed = packed(&markup);
        assert!(
            packed.len() < markup.len() / 4,
            "{} of {}",
            packed.len(),
            markup.len()
        );
        let inflated = miniz_oxide::inflate::decompress_to_vec(&unbase64(&packed)).unwrap();
        assert_eq!(String::from_utf8(inflated).unwrap(), markup);
    }
}
