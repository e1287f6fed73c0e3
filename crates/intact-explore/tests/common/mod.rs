//! Shared by the explorer's integration tests.
#![allow(dead_code)]

pub mod protocol;
