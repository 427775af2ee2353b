//! Feedback intake (filled in below).
