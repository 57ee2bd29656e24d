"""Kafka record-batch compression codecs (attributes bits 0-2), backed by cramjam.

Kafka compresses the records section of a v2 batch as one block. Formats per codec:
gzip is a gzip member, lz4 the LZ4 *frame* format (Kafka's KafkaLZ4BlockOutputStream for
magic >= 1), zstd a zstd frame. Snappy is the odd one: librdkafka writes raw snappy, while the
Java client wraps it in snappy-java's (xerial) chunked framing for every magic, so the decoder
accepts both and the encoder writes raw snappy as librdkafka does.
"""

from __future__ import annotations

import enum
import mmap
import struct

import cramjam

__all__ = ["Codec", "CompressionError", "compress", "decompress"]

# snappy-java's stream header: magic, then version and minimum compatible version (int32 each).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = len(XERIAL_MAGIC) + 8
_CHUNK_LEN = struct.Struct(">i")


class Codec(enum.IntEnum):
    """The compression codec id stored in a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed records could not be decoded (corrupt input or over the size limit)."""


def compress(codec: Codec, data: bytes) -> bytes:
    """Compress ``data`` the way librdkafka does for ``codec``."""
    if codec is Codec.NONE:
        return data
    if codec is Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec is Codec.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is Codec.LZ4:
        return bytes(cramjam.lz4.compress(data))
    return bytes(cramjam.zstd.compress(data))


def decompress(codec: Codec, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Decompress one batch's records section.

    Raises CompressionError on corrupt input or when the output would exceed ``max_size``
    (a guard against decompression bombs; None means unbounded).
    """
    if codec is Codec.NONE:
        return bytes(data)
    try:
        if codec is Codec.SNAPPY:
            return _decompress_snappy(bytes(data), max_size)
        module = {Codec.GZIP: cramjam.gzip, Codec.LZ4: cramjam.lz4, Codec.ZSTD: cramjam.zstd}[codec]
        if max_size is None:
            return bytes(module.decompress(data))
        # An anonymous map reserves max_size without touching it: only written pages cost.
        with mmap.mmap(-1, max(max_size, 1)) as out:
            written = module.decompress_into(data, out)
            return out[:written]
    except cramjam.DecompressionError as e:
        raise CompressionError(f"{codec.name.lower()} records do not decompress: {e}") from e


def _decompress_snappy(data: bytes, max_size: int | None) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_raw(data, max_size)
    chunks: list[bytes] = []
    total = 0
    position = _XERIAL_HEADER_LEN
    while position < len(data):
        if position + _CHUNK_LEN.size > len(data):
            raise CompressionError("snappy-java frame ends inside a chunk length")
        (length,) = _CHUNK_LEN.unpack_from(data, position)
        position += _CHUNK_LEN.size
        if length < 0 or position + length > len(data):
            raise CompressionError("snappy-java chunk runs past the end of the records")
        chunk = _snappy_raw(data[position : position + length], _remaining(max_size, total))
        chunks.append(chunk)
        total += len(chunk)
        position += length
    return b"".join(chunks)


def _snappy_raw(data: bytes, max_size: int | None) -> bytes:
    if max_size is not None and cramjam.snappy.decompress_raw_len(data) > max_size:
        raise CompressionError(f"snappy records decompress to more than {max_size} bytes")
    return bytes(cramjam.snappy.decompress_raw(data))


def _remaining(max_size: int | None, used: int) -> int | None:
    return None if max_size is None else max_size - used
