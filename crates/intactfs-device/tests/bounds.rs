//! A block number near 2^64 is an out-of-range error, never an arithmetic overflow
//! (issue 25 item 5: the bound `block + n - 1` wrapped, or panicked with overflow checks).

use intactfs_device::{BlockDevice, DeviceError, FileDevice};

#[test]
fn runs_at_the_end_of_the_block_space_are_out_of_range() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut dev = FileDevice::create(&dir.path().join("img"), 4096, 16).expect("create");
    let mut two = vec![0u8; 8192];
    for block in [u64::MAX, u64::MAX - 1, 16, 15] {
        let r = dev.read_run(block, &mut two);
        assert!(
            matches!(r, Err(DeviceError::OutOfRange { .. })),
            "read_run at {block}: {r:?}"
        );
        let r = dev.write_run(block, &two);
        assert!(
            matches!(r, Err(DeviceError::OutOfRange { .. })),
            "write_run at {block}: {r:?}"
        );
        let r = dev.write_blocks(block, &[&two[..4096], &two[4096..]]);
        assert!(
            matches!(r, Err(DeviceError::OutOfRange { .. })),
            "write_blocks at {block}: {r:?}"
        );
    }
    dev.write_run(14, &two)
        .expect("the last two blocks are in range");
}
