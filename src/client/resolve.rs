//! Local-first resolution: which capsule an agent rehydrates from when it
//! holds a local copy of its last accepted write and the service has one too.
//!
//! The service never rolls back and accepts exactly one capsule per seq, so
//! the higher seq is the newer state. A local copy can be *ahead* of what a
//! read returns (reads are cached for up to 60 s and mirrored asynchronously),
//! and the service can be ahead of the local copy (another process or
//! machine wrote). Equal seqs must carry the same cursor; if they do not, the
//! local copy is not what the service accepted, and the service wins.

/// One side's claim: the seq and cursor of its last accepted write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version<'a> {
    /// The higher seq is the newer state: the service never rolls back.
    pub seq: u64,
    /// Compared only when the seqs are equal, to spot a diverged local copy.
    pub cursor: &'a str,
}

/// The two sides compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Neither side has a capsule.
    Nothing,
    /// Only the local copy exists (nothing published, or the service was not asked).
    LocalOnly,
    /// Only the service has one (e.g. a fresh machine).
    ServerOnly,
    /// Both, the local copy has the higher seq (the read was stale).
    LocalNewer,
    /// Both, the service has the higher seq (someone else wrote).
    ServerNewer,
    /// Same seq and cursor.
    Agree,
    /// Same seq, different cursor: the local copy is not what was accepted.
    Diverged,
}

/// Which copy to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `published.json`, the local record of the last accepted write.
    Local,
    /// The service's current capsule (capsule.json).
    Server,
}

impl Resolution {
    /// The copy to rehydrate from (and to store locally), if any. On
    /// agreement the local copy is used: it needs no download.
    pub fn winner(self) -> Option<Side> {
        match self {
            Resolution::Nothing => None,
            Resolution::LocalOnly | Resolution::LocalNewer | Resolution::Agree => Some(Side::Local),
            Resolution::ServerOnly | Resolution::ServerNewer | Resolution::Diverged => {
                Some(Side::Server)
            }
        }
    }

    /// The snake_case name the CLI prints (`selfcap rehydrate`'s progress
    /// line).
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Nothing => "nothing",
            Resolution::LocalOnly => "local_only",
            Resolution::ServerOnly => "server_only",
            Resolution::LocalNewer => "local_newer",
            Resolution::ServerNewer => "server_newer",
            Resolution::Agree => "agree",
            Resolution::Diverged => "diverged",
        }
    }
}

/// Compares the local copy with the service's head.
pub fn resolve(local: Option<Version<'_>>, server: Option<Version<'_>>) -> Resolution {
    match (local, server) {
        (None, None) => Resolution::Nothing,
        (Some(_), None) => Resolution::LocalOnly,
        (None, Some(_)) => Resolution::ServerOnly,
        (Some(l), Some(s)) if l.seq > s.seq => Resolution::LocalNewer,
        (Some(l), Some(s)) if l.seq < s.seq => Resolution::ServerNewer,
        (Some(l), Some(s)) if l.cursor == s.cursor => Resolution::Agree,
        (Some(_), Some(_)) => Resolution::Diverged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(seq: u64, cursor: &str) -> Option<Version<'_>> {
        Some(Version { seq, cursor })
    }

    #[test]
    fn higher_seq_wins_ties_agree() {
        assert_eq!(resolve(None, None), Resolution::Nothing);
        assert_eq!(resolve(None, None).winner(), None);
        assert_eq!(resolve(v(1, "a"), None).winner(), Some(Side::Local));
        assert_eq!(resolve(None, v(1, "a")).winner(), Some(Side::Server));
        assert_eq!(resolve(v(3, "a"), v(2, "b")), Resolution::LocalNewer);
        assert_eq!(resolve(v(3, "a"), v(2, "b")).winner(), Some(Side::Local));
        assert_eq!(resolve(v(2, "a"), v(3, "b")), Resolution::ServerNewer);
        assert_eq!(resolve(v(2, "a"), v(3, "b")).winner(), Some(Side::Server));
        assert_eq!(resolve(v(3, "a"), v(3, "a")), Resolution::Agree);
        assert_eq!(resolve(v(3, "a"), v(3, "a")).winner(), Some(Side::Local));
    }

    #[test]
    fn a_tie_with_different_cursors_goes_to_the_service() {
        assert_eq!(resolve(v(3, "a"), v(3, "b")), Resolution::Diverged);
        assert_eq!(resolve(v(3, "a"), v(3, "b")).winner(), Some(Side::Server));
    }

    #[test]
    fn the_newer_side_wins_even_with_the_same_content() {
        // Republishing an identical capsule raises seq without changing the cursor.
        assert_eq!(resolve(v(4, "a"), v(5, "a")), Resolution::ServerNewer);
        assert_eq!(resolve(v(0, "a"), v(0, "a")), Resolution::Agree);
    }
}
