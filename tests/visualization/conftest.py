"""Graph test fixtures: real PyTorch dumps made once per session (statistics, md5, tensor; clean and faulty)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from graph_faults import FAULT_BLOCK  # noqa: E402


@pytest.fixture(scope="session")
def pt_dumps(tmp_path_factory):
    """{(task, 'good'|'bad'): dump root}: a 4-block model and the same model with block 2's weight x8."""
    from vis_helpers import dump, make_model

    root = tmp_path_factory.mktemp("pt_dumps")
    dumps = {}
    for task, summary in (("statistics", None), ("md5", "md5"), ("tensor", None)):
        for label, fault in (("good", None), ("bad", FAULT_BLOCK)):
            directory = os.path.join(str(root), f"{task}_{label}")
            dumps[(task, label)] = dump(directory, make_model(fault_block=fault),
                                        task="tensor" if task == "tensor" else "statistics", summary_mode=summary)
    return dumps
