"""Calibration data from files, for `hobbit quantize --calibration PATH`:

- FILE.npy: one array, samples stacked on axis 0, for a model with one input. An array of
  the input's rank gives batches of one (x[i:i+1]); one of rank + 1 gives x[i] as batches.
- FILE.npz: the same per input, one stacked array named after each input.
- DIR: one batch per file, in file-name order: .npy files (one-input models; an array one
  rank short of the input gets a leading batch axis of 1) or .npz files holding one array
  per input name.

Files are read as batches are consumed (.npy through a memory map), so a large set is never
held in memory at once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hobbit.errors import CalibrationError
from hobbit.quantize.calibrate import DeclaredInput


class CalibrationFiles:
    """The batches in a calibration path; len() is the batch count, iteration reads them."""

    def __init__(self, path: str | os.PathLike, inputs: list[DeclaredInput]):
        self.path = Path(path)
        self.inputs = inputs
        if self.path.is_dir():
            self._files = sorted(p for p in self.path.iterdir() if p.suffix in (".npy", ".npz"))
            if not self._files:
                raise CalibrationError(f"calibration folder '{self.path}' holds no .npy or .npz files")
            self._stacked = None
        elif self.path.is_file():
            self._files = []
            self._stacked = self._open_stacked()
        else:
            raise CalibrationError(f"calibration data '{self.path}' does not exist")

    def __len__(self) -> int:
        if self._stacked is None:
            return len(self._files)
        return min(_count(array, spec) for spec, array in zip(self.inputs, self._stacked))

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        if self._stacked is None:
            for path in self._files:
                yield self._read_batch(path)
            return
        for index in range(len(self)):
            yield {spec.name: _sample(array, spec, index) for spec, array in zip(self.inputs, self._stacked)}

    def _open_stacked(self) -> list[np.ndarray]:
        if self.path.suffix == ".npz":
            arrays = self._load(self.path)
            missing = [spec.name for spec in self.inputs if spec.name not in arrays.files]
            if missing:
                raise CalibrationError(f"'{self.path}' has arrays {arrays.files}, but not the model's "
                                       f"input(s) {missing}")
            stacked = [arrays[spec.name] for spec in self.inputs]
            for spec, array in zip(self.inputs, stacked):
                _count(array, spec, self.path)
            return stacked
        if len(self.inputs) != 1:
            raise CalibrationError(f"'{self.path}' is one array, but the model has {len(self.inputs)} inputs "
                                   f"({[i.name for i in self.inputs]}): give an .npz with one array per input")
        array = self._load(self.path)
        _count(array, self.inputs[0], self.path)
        return [array]

    def _read_batch(self, path: Path) -> dict[str, np.ndarray]:
        if path.suffix == ".npz":
            arrays = self._load(path)
            return {name: np.asarray(arrays[name]) for name in arrays.files}
        if len(self.inputs) != 1:
            raise CalibrationError(f"'{path}' is one array, but the model has {len(self.inputs)} inputs "
                                   f"({[i.name for i in self.inputs]}): use .npz files with one array per input")
        spec = self.inputs[0]
        array = np.load(path)
        if spec.dims is not None and array.ndim == len(spec.dims) - 1:
            array = array[np.newaxis]
        return {spec.name: array}

    @staticmethod
    def _load(path: Path) -> np.ndarray | np.lib.npyio.NpzFile:
        try:
            return np.load(path, mmap_mode="r") if path.suffix == ".npy" else np.load(path)
        except (OSError, ValueError) as exc:
            raise CalibrationError(f"cannot read calibration file '{path}': {exc}") from exc


def _count(array: np.ndarray, spec: DeclaredInput, path: Path | None = None) -> int:
    rank = len(spec.dims) if spec.dims is not None else array.ndim
    if array.ndim not in (rank, rank + 1):
        where = f"'{path}'" if path else f"the array for input '{spec.name}'"
        raise CalibrationError(f"{where} has shape {array.shape}: for input '{spec.name}' of rank {rank} it "
                               f"must stack samples on axis 0 (rank {rank}, batches of one, or rank {rank + 1})")
    return array.shape[0]


def _sample(array: np.ndarray, spec: DeclaredInput, index: int) -> np.ndarray:
    rank = len(spec.dims) if spec.dims is not None else array.ndim
    part = array[index:index + 1] if array.ndim == rank else array[index]
    return np.ascontiguousarray(part)
