"""Type stubs of shardread (the C extension's classes, as the package exports them)."""
import os
from typing import Any, Iterator, Literal, Optional, Sequence, Union

import numpy as np

__version__: str
LIBRARY_VERSION_MAJOR: int
LIBRARY_VERSION_MINOR: int

_Path = Union[str, bytes, os.PathLike]
_Access = Literal["mmap", "pread", "direct"]
_Pair = Sequence[float]
_Channels = Union[float, Sequence[float]]

class Error(Exception):
    code: int
    reason: str

class CorruptError(Error): ...
class ArgumentError(Error, ValueError): ...
class ShapeError(ArgumentError): ...
class NotFoundError(Error, FileNotFoundError): ...
class ReadError(Error, OSError): ...
class StateError(Error): ...
class UnsupportedError(Error): ...

def replay(image: Any, ops: Sequence[tuple[str, dict[str, Any]]]) -> Any:
    """The uint8 HxWxC array that one sample's ops (Loader(return_params="ops")) make of the
    stored image, computed by torchvision on the PIL image."""

class Dataset:
    """A dataset directory written by shardc, sample by sample (map-style)."""

    def __init__(self, path: _Path, access: _Access = "mmap",
                 verify_samples: bool = False, cache: _Path | None = None,
                 fields: Union[bool, Sequence[str]] = False,
                 label_dtype: Any = None,
                 cache_limit: Union[int, str, None] = None) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> tuple[np.ndarray, Any]: ...
    def sample(self, index: int) -> dict[str, Any]: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def class_to_idx(self) -> dict[str, int]: ...
    @property
    def targets(self) -> list[int]: ...
    @property
    def field_schema(self) -> list[tuple[str, str, int]]: ...
    def fields(self, indices: Sequence[int], names: Optional[Sequence[str]] = None,
               framework: str = "numpy") -> dict[str, Any]: ...
    @property
    def categories(self) -> list[dict[str, Any]]: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def path(self) -> str: ...

class Stream:
    """One dataset of a mixture: a weight, or repeat / choose, and its own on_error."""

    path: _Path
    weight: float | None
    repeat: float | None
    choose: int | None
    on_error: str | None
    def __init__(
        self,
        path: _Path,
        weight: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        on_error: str | None = None,
    ) -> None: ...

class Loader:
    """Batches of a shardc dataset, read ahead by worker threads into a ring of buffers."""

    def __init__(
        self,
        path: _Path | Sequence[tuple[_Path, float] | Stream],
        batch_size: int = 256,
        shuffle: bool = False,
        seed: int = 0,
        threads: int | Literal["auto"] | None = None,
        rank: int | None = None,
        world: int | None = None,
        drop_last: bool = False,
        size: int | tuple[int, int] | None = None,
        random_crop: bool = False,
        flip: bool | float = False,
        access: _Access = "mmap",
        framework: Literal["numpy", "torch"] = "numpy",
        return_indices: bool = False,
        order: Literal["sequential", "random", "quasi"] | None = None,
        prefetch: int | None = None,
        pin_memory: bool = True,
        uneven: Literal["pad", "drop"] = "pad",
        quasi_window: int = 4,
        rrc: bool | _Pair | None = None,
        ratio: _Pair | None = None,
        interpolation: Any = "bilinear",
        dtype: Any = None,
        layout: Literal["NHWC", "NCHW"] = "NHWC",
        mean: _Channels | Literal["dataset"] | None = None,
        std: _Channels | None = None,
        return_params: bool | Literal["ops"] = False,
        on_error: Literal["fail", "skip", "substitute"] = "fail",
        verify_samples: bool = False,
        return_recovery: bool = False,
        pad: bool = False,
        color_jitter: Sequence[float | _Pair] | dict[str, float | _Pair] | None = None,
        grayscale: float = 0.0,
        erasing: float | dict[str, Any] | None = None,
        rotation: float | _Pair | None = None,
        affine: dict[str, Any] | None = None,
        auto_augment: str | dict[str, Any] | Any | None = None,
        augment_interpolation: Any = None,
        augment_fill: _Channels | None = None,
        mixup: float | None = None,
        cutmix: float | None = None,
        num_classes: int | None = None,
        erase: float | None = None,
        erase_value: float | Sequence[float] | Literal["random"] | None = None,
        fill: _Channels | None = None,
        targets: bool = False,
        min_box_area_fraction: float = 0.0,
        multiscale: tuple[int | Sequence[int], int] | None = None,
        scale_jitter: int | tuple[int, int] | tuple[int | tuple[int, int], _Pair] | None = None,
        letterbox: int | tuple[int, int] | None = None,
        pad_to: bool | int | tuple[int, int] | None = None,
        samples_per_epoch: int | None = None,
        labels: str = "keep",
        return_streams: bool = False,
        cache: _Path | None = None,
        fields: bool | Sequence[str] = False,
        transform: Any = None,
        scale: Literal[1, 255] | None = None,
        py_workers: int | None = None,
        py_pool: Literal["thread", "process"] = "thread",
        max_threads: int | None = None,
        cache_limit: int | str | None = None,
        prefetch_shards: int | None = None,
        resize: int | tuple[int, int] | None = None,
        flip_indices: Sequence[int] | None = None,
        label_dtype: Any = None,
    ) -> None: ...
    @property
    def plan(self) -> dict[str, Any] | None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[tuple[Any, ...]]: ...
    def set_epoch(self, epoch: int) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None: ...
    def dataset_fingerprint(self) -> str: ...
    @property
    def streams(self) -> list[Stream] | None: ...
    @property
    def classes(self) -> list[str]: ...
    @property
    def class_to_idx(self) -> dict[str, int]: ...
    def recovery(self) -> dict[str, Any]: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def prefetch(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def copies(self) -> int: ...
    @property
    def held(self) -> int: ...
    @property
    def fenced(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def active_threads(self) -> int: ...
    def stage_timing(self, on: bool | None = None) -> bool: ...
    def pipeline_stats(self) -> dict[str, Any]: ...
    def fill_events(self) -> list[list[tuple[int, int, int]]]: ...

# the pipeline doctor (shardread/doctor.py; the module is callable as doctor())
from . import doctor as doctor

# the writer (shardread/_writer.py)
from ._writer import BuildError as BuildError, BuildResult as BuildResult, Writer as Writer, \
    build as build
