//! The network transport's messages, one MPI message each, tagged by kind:
//!
//! * **put** ([`TAG_PUT`]): a chunk for a rank of the receiving process,
//!   with where it goes (rank, buffer, byte offset) and the plan's signal
//!   to raise on the receiver's node once it is written (NCCL's net
//!   transport with a proxy: the receiving side lands the data and
//!   signals locally);
//! * **signal** ([`TAG_SIGNAL`]): a plan signal raised on another node
//!   that a rank of this node waits for;
//! * **failure** ([`TAG_FAIL`]): a rank failed (or died); every node
//!   records it, so every wait ends naming it;
//! * **heartbeat** ([`TAG_BEAT`], empty): "this process is alive", sent
//!   by each process's receiver to every rank of the other nodes a few
//!   times a second, so a node that died (and can tell nobody) is noticed
//!   by its silence;
//! * **goodbye** ([`TAG_BYE`], empty): "this process is done with the job"
//!   (its transport closed cleanly): its silence from now on is no failure.
//!
//! Little-endian u64 words, then the payload.

use crate::error::{Error, Result};

pub(crate) const TAG_PUT: i32 = 7001;
pub(crate) const TAG_SIGNAL: i32 = 7002;
pub(crate) const TAG_FAIL: i32 = 7003;
pub(crate) const TAG_BEAT: i32 = 7004;
pub(crate) const TAG_BYE: i32 = 7005;

/// No signal with the put.
const NONE: u64 = u64::MAX;

/// A put's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Put {
    pub gen: u64,
    pub signal: Option<usize>,
    pub from: usize,
    pub to: usize,
    pub buf: u32,
    pub offset: usize,
}

const PUT_WORDS: usize = 6;

fn words(v: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(v.len() * 8 + payload.len());
    for w in v {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b.extend_from_slice(payload);
    b
}

fn read(b: &[u8], n: usize, what: &str) -> Result<Vec<u64>> {
    if b.len() < n * 8 {
        return Err(Error::internal(format!(
            "a network {what} message of {} bytes (at least {} expected)",
            b.len(),
            n * 8
        )));
    }
    Ok(b[..n * 8]
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

impl Put {
    /// The message: header and data.
    #[cfg(test)]
    pub fn encode(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(data, &mut out);
        out
    }

    /// The message, written into `out` (its old content dropped, its
    /// memory reused).
    pub(crate) fn encode_into(&self, data: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(PUT_WORDS * 8 + data.len());
        for w in [
            self.gen,
            self.signal.map_or(NONE, |s| s as u64),
            self.from as u64,
            self.to as u64,
            u64::from(self.buf),
            self.offset as u64,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(data);
    }

    /// The header and the data of a put message.
    pub fn decode(b: &[u8]) -> Result<(Put, &[u8])> {
        let w = read(b, PUT_WORDS, "put")?;
        Ok((
            Put {
                gen: w[0],
                signal: (w[1] != NONE).then_some(w[1] as usize),
                from: w[2] as usize,
                to: w[3] as usize,
                buf: w[4] as u32,
                offset: w[5] as usize,
            },
            &b[PUT_WORDS * 8..],
        ))
    }
}

/// A signal message: (gen, signal, from).
pub(crate) fn signal(gen: u64, signal: usize, from: usize) -> Vec<u8> {
    words(&[gen, signal as u64, from as u64], &[])
}

pub(crate) fn decode_signal(b: &[u8]) -> Result<(u64, usize, usize)> {
    let w = read(b, 3, "signal")?;
    Ok((w[0], w[1] as usize, w[2] as usize))
}

/// A failure message: (gen, rank, why).
pub(crate) fn failure(gen: u64, rank: usize, why: &str) -> Vec<u8> {
    words(&[gen, rank as u64], why.as_bytes())
}

pub(crate) fn decode_failure(b: &[u8]) -> Result<(u64, usize, String)> {
    let w = read(b, 2, "failure")?;
    Ok((
        w[0],
        w[1] as usize,
        String::from_utf8_lossy(&b[16..]).into_owned(),
    ))
}

#[cfg(test)]
mod tests;
