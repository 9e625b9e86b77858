"""A model specification read from a YAML or JSON file: :meth:`ModelSpec.to_dict`'s layout.

```yaml
name: small_cnn
input_shape: [1, 28, 28]      # (C, H, W) images, (F,) features, (L,) token ids
num_classes: 10
layers:
  - {kind: conv2d, filters: 16, kernel: 3, padding: same}
  - {kind: activation, function: relu}
  - {kind: flatten}
  - {kind: dense, units: 10}
```

Every field is checked before a layer is made, so that a typo is refused in one line naming
the allowed values rather than failing inside a backend.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from dltune._errors import ParameterError
from dltune._validation import check_choice, check_float, check_int
from dltune.models._spec import _KINDS, Layer, ModelSpec, SpecError, layer_from_dict

__all__ = ["load_spec", "spec_from_mapping"]

_TOP = ("name", "input_shape", "num_classes", "layers")


def _check_layer(item: Any, where: str) -> dict[str, Any]:
    """``item`` as a layer dictionary whose kind and fields exist and whose values have their
    field's type (a residual's body and shortcut checked the same way)."""
    if not isinstance(item, dict):
        raise SpecError(f"The {where!r} parameter must be a mapping such as {{kind: dense, units: 10}}. "
                        f"Got {item!r} instead.")
    kind = check_choice(f"{where}.kind", item.get("kind"), sorted(_KINDS))
    fields = {f.name: f for f in dataclasses.fields(_KINDS[kind])}
    out: dict[str, Any] = {"kind": kind}
    for key, value in item.items():
        if key == "kind":
            continue
        if key not in fields:
            shown = ", ".join(repr(n) for n in fields) or "none"
            raise SpecError(f"The {where!r} {kind} layer takes the fields {{{shown}}}. Got {key!r} instead.")
        kind_of = str(fields[key].type)
        if kind_of.startswith("tuple"):  # a residual's layer sequences
            if not isinstance(value, list):
                raise SpecError(f"The '{where}.{key}' parameter must be a list of layers. Got {value!r} instead.")
            value = [_check_layer(x, f"{where}.{key}[{i}]") for i, x in enumerate(value)]
        elif kind_of == "int":
            value = check_int(f"{where}.{key}", value, 1)
        elif kind_of == "float":
            value = check_float(f"{where}.{key}", value)
        elif kind_of == "bool" and not isinstance(value, bool):
            raise SpecError(f"The '{where}.{key}' parameter must be a bool. Got {value!r} instead.")
        elif kind_of == "str" and not isinstance(value, str):
            raise SpecError(f"The '{where}.{key}' parameter must be a str. Got {value!r} instead.")
        out[key] = value
    missing = [n for n, f in fields.items() if n not in out
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise SpecError(f"The {where!r} {kind} layer needs the field {missing[0]!r}: it takes {{{', '.join(repr(n) for n in fields)}}}.")
    return out


def spec_from_mapping(data: Any, name: str = "model") -> ModelSpec:
    """A :class:`ModelSpec` from a mapping in :meth:`ModelSpec.to_dict`'s layout, checked field
    by field; ``name`` where the mapping names none."""
    if not isinstance(data, dict):
        raise SpecError(f"A model specification must be a mapping with the keys {list(_TOP)}. "
                        f"Got {type(data).__name__} instead.")
    for key in data:
        check_choice("model specification key", key, _TOP)
    shape = data.get("input_shape")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 3:
        raise SpecError("The 'input_shape' parameter must be a list of 1 to 3 ints: [C, H, W] images, "
                        f"[F] features or [L] token ids. Got {shape!r} instead.")
    layers = data.get("layers")
    if not isinstance(layers, list) or not layers:
        raise SpecError(f"The 'layers' parameter must be a non-empty list of layers. Got {layers!r} instead.")
    checked: list[Layer] = [layer_from_dict(_check_layer(item, f"layers[{i}]")) for i, item in enumerate(layers)]
    return ModelSpec(
        name=str(data.get("name", name)),
        input_shape=tuple(check_int("input_shape", v, 1) for v in shape),
        num_classes=check_int("num_classes", data.get("num_classes"), 2),
        layers=tuple(checked),
    )


def load_spec(path: str | Path) -> ModelSpec:
    """The model a YAML or JSON file describes (JSON where the name ends in ``.json``, else YAML,
    which reads JSON too); named after the file where it names itself not.

    Raises:
        ParameterError: the file cannot be read or parsed, or describes no valid model.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ParameterError(f"The model file {str(path)!r} cannot be read: {exc.strerror or exc}.") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ParameterError(f"The model file {str(path)!r} is not valid JSON: {exc}.") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            problem = " ".join(str(exc).split())  # one line: PyYAML's text spans several
            raise ParameterError(f"The model file {str(path)!r} is not valid YAML: {problem}.") from None
    return spec_from_mapping(data, name=path.stem)
