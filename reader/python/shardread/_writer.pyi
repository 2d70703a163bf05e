"""Type stubs of shardread's writer (shardread.build, shardread.Writer)."""
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

_Path = Union[str, os.PathLike]
# a path, encoded bytes, a PIL.Image.Image, or a uint8 array HxW / HxWxC (C 1, 3, 4)
Image = Union[_Path, bytes, bytearray, memoryview, np.ndarray, Any]
_HW = Union[int, Tuple[int, int]]
_Bytes = Union[int, str]
# a detection target: boxes (N, 4) x1, y1, x2, y2 and labels (N,); iscrowd, area, image_id
Target = Mapping[str, Any]
# categories=: names (ids 1, 2, ...), {id: name}, or COCO's [{"id": id, "name": name}]
_Categories = Union[Sequence[str], Mapping[int, str], Sequence[Mapping[str, Any]]]

class BuildError(RuntimeError):
    messages: list[str]
    code: Optional[str]
    exit: Optional[int]
    rejects: list[Tuple[str, str]]

class BuildResult:
    out: str
    samples: int
    classes: int
    shards: int
    bytes: int
    inputs: int
    seconds: float
    images_per_s: float
    threads: int
    rejects: list[tuple[str, str]]
    warnings: list[tuple[str, str]]
    messages: list[str]

class Writer:
    out: str
    result: Optional[BuildResult]
    def __init__(self, out: _Path, *, size: Optional[_HW] = ..., short_side: Optional[int] = ...,
                 max_side: Optional[int] = ..., crop: Optional[_HW] = ...,
                 fit: Optional[str] = ..., filter: Optional[str] = ...,
                 shrink_on_load: bool = ..., channels: int = ..., format: str = ...,
                 quality: Optional[int] = ..., compress: Optional[str] = ...,
                 jpeg_fraction: Optional[float] = ..., threads: Optional[int] = ...,
                 shard_bytes: Optional[_Bytes] = ..., shard_samples: Optional[int] = ...,
                 align: Optional[_Bytes] = ..., max_pixels: Optional[int] = ...,
                 max_image_side: Optional[int] = ..., max_file_bytes: Optional[_Bytes] = ...,
                 augment: Optional[int] = ..., aug: Optional[str] = ..., seed: Optional[int] = ...,
                 strict: bool = ..., force: bool = ..., classes: Optional[Sequence[str]] = ...,
                 window: Optional[int] = ..., window_bytes: Optional[_Bytes] = ...,
                 layout: str = ..., categories: Optional[_Categories] = ...) -> None: ...
    def add(self, image: Image, label: Union[int, Target],
            fields: Optional[Mapping[str, Any]] = None) -> None: ...
    def close(self) -> BuildResult: ...
    def cancel(self) -> None: ...
    def __enter__(self) -> "Writer": ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool: ...

def build(samples: Iterable[Union[Tuple[Image, Union[int, Target]],
                                  Tuple[Image, Union[int, Target], Mapping[str, Any]]]],
          out: _Path, *, size: Optional[_HW] = ...,
          short_side: Optional[int] = ..., max_side: Optional[int] = ...,
          crop: Optional[_HW] = ..., fit: Optional[str] = ..., filter: Optional[str] = ...,
          shrink_on_load: bool = ..., channels: int = ..., format: str = ...,
          quality: Optional[int] = ..., compress: Optional[str] = ...,
          jpeg_fraction: Optional[float] = ..., threads: Optional[int] = ...,
          shard_bytes: Optional[_Bytes] = ..., shard_samples: Optional[int] = ...,
          align: Optional[_Bytes] = ..., max_pixels: Optional[int] = ...,
          max_image_side: Optional[int] = ..., max_file_bytes: Optional[_Bytes] = ...,
          augment: Optional[int] = ..., aug: Optional[str] = ..., seed: Optional[int] = ...,
          strict: bool = ..., force: bool = ..., classes: Optional[Sequence[str]] = ...,
          window: Optional[int] = ..., window_bytes: Optional[_Bytes] = ...,
          layout: str = ..., categories: Optional[_Categories] = ...) -> BuildResult: ...
