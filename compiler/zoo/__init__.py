"""Model zoo: ResNet-18 / MobileNetV2 / a MobileNetV3-style model built with onnx.helper, and the digits demo."""
from compiler.zoo.digits import digits_model_path, load_digits_split
from compiler.zoo.mobilenet import mobilenet_v2, mobilenet_v2_small
from compiler.zoo.mobilenet_v3 import mobilenet_v3_small, mobilenet_v3_style
from compiler.zoo.resnet import resnet18, resnet18_small

MODELS = {"resnet18": resnet18, "resnet18_small": resnet18_small,
          "mobilenet_v2": mobilenet_v2, "mobilenet_v2_small": mobilenet_v2_small,
          "mobilenet_v3": mobilenet_v3_style, "mobilenet_v3_small": mobilenet_v3_small}


def get_model(name: str, **kwargs):
    """Build a zoo model by name (see ``MODELS``)."""
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}; available: {sorted(MODELS)}")
    return MODELS[name](**kwargs)


__all__ = ["MODELS", "get_model", "resnet18", "resnet18_small", "mobilenet_v2", "mobilenet_v2_small",
           "mobilenet_v3_style", "mobilenet_v3_small",
           "load_digits_split", "digits_model_path"]
