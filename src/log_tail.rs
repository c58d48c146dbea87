//! The end of a log, for `diagnose`: the last out-of-memory message is at the end of what the
//! run printed, so only the last `KEPT` bytes are read (a file from there, standard input
//! through a window that slides), and a log of any size costs that much memory.

use std::io::{Read, Seek, SeekFrom};

/// How much of a log's end is read: an OOM message with its traceback is a few KiB, a
/// training loop's last lines before it a few hundred; 16 MiB holds them many times over.
pub(crate) const KEPT: usize = 16 << 20;

/// The last `KEPT` bytes of the file at `path`, and whether its start was left out.
pub(crate) fn read_file_end(path: &std::path::Path) -> std::io::Result<(Vec<u8>, bool)> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let kept = KEPT as u64;
    let cut = len > kept;
    if cut {
        file.seek(SeekFrom::Start(len - kept))?;
    }
    let mut bytes = Vec::new();
    file.take(kept).read_to_end(&mut bytes)?;
    Ok((bytes, cut))
}

/// The last `KEPT` bytes of `reader`, read to its end, and whether its start was left out.
pub(crate) fn read_end(mut reader: impl Read) -> std::io::Result<(Vec<u8>, bool)> {
    let mut window: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    let mut cut = false;
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        window.extend_from_slice(&chunk[..n]);
        if window.len() > 2 * KEPT {
            window.drain(..window.len() - KEPT);
            cut = true;
        }
    }
    if window.len() > KEPT {
        window.drain(..window.len() - KEPT);
        cut = true;
    }
    Ok((window, cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_end_is_kept() {
        let mut input = vec![b'a'; 3 * KEPT];
        input.extend_from_slice(b"END");
        let (kept, cut) = read_end(input.as_slice()).unwrap_or_default();
        assert!(cut);
        assert_eq!(kept.len(), KEPT);
        assert!(kept.ends_with(b"END"));
        let (kept, cut) = read_end(&b"short"[..]).unwrap_or_default();
        assert!(!cut);
        assert_eq!(kept, b"short");
    }
}
