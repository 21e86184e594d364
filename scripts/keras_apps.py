"""Write Keras applications (weights=None, BatchNorm statistics calibrated so activations stay
near unit scale) as TensorFlow model files, for `hobbit bench --model FILE`.

    python scripts/keras_apps.py --out build/keras --size 224 MobileNetV2 ResNet50
    hobbit bench --model build/keras/MobileNetV2/saved_model --threads 1

The models are the ones the parity tests build (tests/frontend/tf/models.py), at any input
size; nothing is downloaded."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.frontend.tf import models  # noqa: E402

FORMATS = ("savedmodel", "graphdef", "keras", "tflite")


def write(name: str, size: int, out: Path, formats: list[str]) -> None:
    recipe = models.RECIPES[name]
    models.keras.utils.set_random_seed(0)
    model = recipe.build(size)
    if recipe.he:
        models.he_scale(model, 0)
    images = models.smooth_images(8, size, 0, recipe.image_mean, recipe.image_std)
    models.calibrate(model, images, 0)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    saved = models.write_saved_model(model, folder / "saved_model")
    if "graphdef" in formats:
        models.write_frozen_graph(model, folder / "frozen.pb")
    if "keras" in formats:
        models.write_keras(model, folder / "model.keras")
    if "tflite" in formats:
        models.write_tflite(saved, folder / "model.tflite")
    print(f"wrote {folder}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=[n for n in models.RECIPES if n != "small_cnn"],
                        help=f"applications (default: all of {', '.join(models.RECIPES)})")
    parser.add_argument("--out", type=Path, required=True, help="folder to write NAME/<files> into")
    parser.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="comma list of savedmodel, graphdef, keras, tflite (the SavedModel is always written)")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    for name in args.names:
        write(name, args.size, args.out, formats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
