"""Model specification files: YAML and JSON in ModelSpec.to_dict's layout, refusals in one line,
and ``--model-file`` on the command line."""

from __future__ import annotations

import json

import pytest
import yaml

from dltune._errors import ParameterError
from dltune.models import (
    LSTM,
    BatchNorm,
    Conv2D,
    Dense,
    Embedding,
    GlobalAvgPool2D,
    ModelSpec,
    Residual,
    build_model,
    load_spec,
)


def _written(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
@pytest.mark.parametrize("spec", [
    build_model("resnet8", (3, 12, 12), 4),
    ModelSpec("small_text", (20,), 2, (Embedding(50, 8), LSTM(6), Dense(2))),
], ids=["resnet", "text"])
def test_a_spec_file_reads_back_the_model_it_was_written_from(tmp_path, suffix, spec):
    path = _written(tmp_path, f"net{suffix}", spec.to_dict())
    assert load_spec(path) == spec == ModelSpec.from_file(path)
    assert load_spec(path).param_count == spec.param_count


def test_a_handwritten_yaml_file_with_a_residual_block(tmp_path):
    path = tmp_path / "cnn.yaml"
    path.write_text(
        "input_shape: [1, 8, 8]\n"
        "num_classes: 10\n"
        "layers:\n"
        "  - {kind: conv2d, filters: 8, kernel: 3, padding: same}\n"
        "  - kind: residual\n"
        "    body:\n"
        "      - {kind: conv2d, filters: 8, kernel: 3, padding: same}\n"
        "      - {kind: batchnorm}\n"
        "  - {kind: globalavgpool2d}\n"
        "  - {kind: dense, units: 10}\n"
    )
    spec = load_spec(path)
    assert spec.name == "cnn"  # named after the file where it names itself not
    assert spec.layers == (Conv2D(8, 3, padding="same"),
                           Residual((Conv2D(8, 3, padding="same"), BatchNorm())), GlobalAvgPool2D(), Dense(10))


GOOD = {"name": "n", "input_shape": [1, 8, 8], "num_classes": 3,
        "layers": [{"kind": "flatten"}, {"kind": "dense", "units": 3}]}


@pytest.mark.parametrize("change, message", [
    ({"layers": [{"kind": "conv3d"}]}, r"^The 'layers\[0\]\.kind' parameter must be one of \{.*'conv2d'.*\}\. "
                                       r"Got 'conv3d' instead\.$"),
    ({"layers": [{"kind": "conv2d", "filter": 8, "kernel": 3}]},
     r"^The 'layers\[0\]' conv2d layer takes the fields \{'filters', 'kernel', 'stride', 'padding'\}\. "
     r"Got 'filter' instead\.$"),
    ({"layers": [{"kind": "dense"}]}, r"^The 'layers\[0\]' dense layer needs the field 'units': it takes \{'units'\}\.$"),
    ({"layers": [{"kind": "dense", "units": "ten"}]}, r"^The 'layers\[0\]\.units' parameter must be an int"),
    ({"layers": [{"kind": "residual", "body": [{"kind": "dense", "unit": 3}]}]},
     r"^The 'layers\[0\]\.body\[0\]' dense layer takes the fields \{'units'\}\. Got 'unit' instead\.$"),
    ({"input_shape": "1x8x8"}, r"^The 'input_shape' parameter must be a list of 1 to 3 ints"),
    ({"classes": 3}, r"^The 'model specification key' parameter must be one of \{'name', 'input_shape', "
                     r"'num_classes', 'layers'\}\. Got 'classes' instead\.$"),
    ({"num_classes": 4}, r"^The last layer must output 4 logits\. Got shape \(3,\)\.$"),
])
def test_a_bad_field_is_refused_in_one_line_naming_the_allowed_values(tmp_path, change, message):
    path = _written(tmp_path, "bad.json", {**GOOD, **change})
    with pytest.raises(ParameterError, match=message) as err:
        load_spec(path)
    assert "\n" not in str(err.value)


def test_unreadable_and_unparsable_files_are_refused_in_one_line(tmp_path):
    (tmp_path / "broken.yaml").write_text("layers: [\n  - {kind: dense\n")
    (tmp_path / "broken.json").write_text('{"layers": [')
    for name, message in (("broken.yaml", "is not valid YAML: "), ("broken.json", "is not valid JSON: "),
                          ("missing.yaml", "cannot be read: No such file or directory")):
        with pytest.raises(ParameterError, match=message) as err:
            load_spec(tmp_path / name)
        assert "\n" not in str(err.value)


def test_model_file_on_the_command_line(tmp_path, capsys):
    from dltune.cli import build_parser

    path = _written(tmp_path, "net.yaml", GOOD)
    for command in ("bench", "tune", "recommend", "study"):
        args = build_parser([command]).parse_args([command, "--model-file", path])
        assert args.model == load_spec(path) and args.model_file == path
        default = build_parser([command]).parse_args([command])
        assert default.model_file is None and not isinstance(default.model, ModelSpec)
    bad = _written(tmp_path, "bad.yaml", {**GOOD, "layers": [{"kind": "dense", "unit": 3}]})
    for argv, message in ((["bench", "--model-file", bad], "argument --model-file: The 'layers[0]' dense layer"),
                          (["bench", "--model", "mlp", "--model-file", path],
                           "argument --model-file: not allowed with argument --model")):
        with pytest.raises(SystemExit) as exit_:
            build_parser(argv).parse_args(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.startswith("dltune bench: error: ") and message in err
        assert err.count("\n") == 1
