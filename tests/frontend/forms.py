"""What the submit form posts: one valid job, for the tests to change a field or two of."""

from __future__ import annotations


def submit_form(**overrides: str) -> dict[str, str]:
    fields = {
        "name": "train",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": "python train.py",
        "nodes": "2",
        "gpus_per_node": "8",
        "wall_time_minutes": "60",
        "priority_class": "normal",
        "max_restarts": "0",
    }
    return fields | overrides
