"""Unit tests of intact.fs that need no mount:
PYTHONPATH=python python3 -m unittest discover -s python/tests
(the tests against a real mount are in libintact/test.sh)."""

import errno
import os
import tempfile
import unittest

import intact
import intact.fs as ifs


def ioc(direction, nr, size):
    # Linux's generic _IOC encoding (asm-generic/ioctl.h).
    return (direction << 30) | (size << 16) | (0xCC << 8) | nr


class Abi(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(ifs.SETSTREAM, ioc(1, 1, 16))
        self.assertEqual(ifs.GETSTREAM, ioc(2, 2, 16))
        self.assertEqual(ifs.STREAMSYNC, ioc(0, 3, 0))
        self.assertEqual((ifs.SETSTREAM, ifs.GETSTREAM, ifs.STREAMSYNC), (0x4010CC01, 0x8010CC02, 0xCC03))
        self.assertEqual(ifs.IGNORE_FSYNC, 1)
        self.assertEqual(ifs._ARG.size, 16)

    def test_region_numbers(self):
        self.assertEqual((ifs.BEGIN, ifs.COMMIT, ifs.ABORT, ifs.ADD), tuple(ioc(0, nr, 0) for nr in (7, 8, 9, 10)))
        self.assertEqual((ifs.BEGIN, ifs.COMMIT, ifs.ABORT, ifs.ADD), (0xCC07, 0xCC08, 0xCC09, 0xCC0A))
        # F2FS's numbers (_IO(0xf5, n), _IOR(0xf5, 12, __u32)).
        self.assertEqual((ifs.F2FS_IOC_START_ATOMIC_WRITE, ifs.F2FS_IOC_COMMIT_ATOMIC_WRITE, ifs.F2FS_IOC_ABORT_VOLATILE_WRITE), (0xF501, 0xF502, 0xF505))
        self.assertEqual(ifs.F2FS_IOC_GET_FEATURES, (2 << 30) | (4 << 16) | (0xF5 << 8) | 12)
        self.assertEqual(ifs.F2FS_FEATURE_ATOMIC_WRITE, 4)

    def test_package_reexports(self):
        self.assertIs(intact.setstream, ifs.setstream)
        self.assertIs(intact.stream, ifs.stream)


class StreamId(unittest.TestCase):
    def test_fnv1a_vectors(self):
        self.assertEqual(ifs.stream_id("a"), 0xAF63DC4C8601EC8C)
        self.assertEqual(ifs.stream_id("foobar"), 0x85944171F73967E8)
        self.assertEqual(ifs.stream_id(b"a"), ifs.stream_id("a"))
        self.assertEqual(ifs.stream_id("é"), ifs.stream_id("é".encode("utf-8")))

    def test_init(self):
        self.assertEqual(ifs.stream_id("init"), 0)
        self.assertEqual(ifs.stream_id(""), 0)
        self.assertNotEqual(ifs.stream_id("Init"), 0)

    def test_types(self):
        with self.assertRaises(TypeError):
            ifs.stream_id(5)
        with self.assertRaises(TypeError):
            ifs._to_id(True)
        with self.assertRaises(ValueError):
            ifs._to_id(-1)
        with self.assertRaises(ValueError):
            ifs._to_id(1 << 64)
        self.assertEqual(ifs._to_id((1 << 64) - 1), (1 << 64) - 1)
        self.assertEqual(ifs._to_id("a"), 0xAF63DC4C8601EC8C)


class OffMount(unittest.TestCase):
    def test_enotty(self):
        with tempfile.TemporaryDirectory() as d:
            for call in (lambda: ifs.getstream(d), lambda: ifs.setstream(d, "x"), lambda: ifs.streamsync(d)):
                with self.assertRaises(OSError) as cm:
                    call()
                self.assertEqual(cm.exception.errno, errno.ENOTTY)
            with self.assertRaises(OSError) as cm:
                with ifs.stream(d, "x"):
                    self.fail("entered a stream off the mount")
            self.assertEqual(cm.exception.errno, errno.ENOTTY)

    def test_regions_enotty(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "f")
            open(f, "wb").close()
            for call in (lambda: ifs.begin(d), lambda: ifs.commit(d), lambda: ifs.abort(d), lambda: ifs.add(f)):
                with self.assertRaises(OSError) as cm:
                    call()
                self.assertEqual(cm.exception.errno, errno.ENOTTY)
                self.assertIn("not on an intactfs mount", str(cm.exception))
            with self.assertRaises(OSError) as cm:
                with ifs.atomic(d):
                    self.fail("entered a region off the mount")
            self.assertEqual(cm.exception.errno, errno.ENOTTY)

    def test_region_strerror(self):
        self.assertEqual(ifs.region_strerror(errno.EALREADY), "an atomic region is already open (regions do not nest)")
        self.assertEqual(ifs.region_strerror(errno.EINVAL), "no atomic region is open")
        self.assertEqual(ifs.region_strerror(errno.EXDEV), "no atomic region of this process on that file's mount")
        self.assertEqual(ifs.region_strerror(errno.EBUSY), "the file belongs to another atomic region")
        self.assertEqual(ifs.region_strerror(errno.ENOTTY), "not on an intactfs mount")
        self.assertEqual(ifs.region_strerror(errno.EIO), os.strerror(errno.EIO))

    def test_missing_path(self):
        with self.assertRaises(FileNotFoundError):
            ifs.getstream("/nonexistent/intact")

    def test_fd_is_not_closed(self):
        with tempfile.TemporaryDirectory() as d:
            fd = os.open(d, os.O_RDONLY)
            try:
                with self.assertRaises(OSError):
                    ifs.getstream(fd)
                os.fstat(fd)  # still open
            finally:
                os.close(fd)


if __name__ == "__main__":
    unittest.main()
