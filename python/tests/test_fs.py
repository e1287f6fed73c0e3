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
