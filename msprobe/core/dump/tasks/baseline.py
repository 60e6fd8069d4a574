"""Baseline mode of the statistics task: compare fingerprints with a good run's dump as the run goes, and save
real tensors only for the first calls that differ."""
import json
import os

from msprobe.core.dump.stats import FINGERPRINT_KEY
from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.dump.writer import rank_dir_name
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger

__all__ = ["Baseline"]


@register_task("statistics_baseline")
class Baseline(Task):
    """task "statistics" with summary_mode "xor" and a `bench_path`: every dumped call is written as the
    statistics task writes it (with its "xor" fingerprints), and each finished call is compared with the same
    call of the good run's fingerprint dump. The first `diff_nums` calls whose fingerprints differ also get
    their tensors — inputs (as they were before the call) and outputs — in dump_tensor_data/ (`data_name`),
    and an entry key "bench_differs": true. One extra run then yields the real tensors at the origin.

    config.json, "statistics" section:
      summary_mode   must be "xor"
      bench_path     the good run's xor dump: a dump root (step*/rank*/dump.json is taken for the same step
                     and rank), or one dump.json used for every step
      diff_nums      how many differing calls get tensor files (default 1)

    Cost: the xor dump's, plus one dictionary look-up per call; tensors are copied only for the calls kept.
    An input changed in place by its call gets no file (its fingerprint no longer matches).
    """

    saves_tensors = True

    def __init__(self, context):
        super().__init__(context)
        config = context.config
        if config.summary_mode != FINGERPRINT_KEY:
            raise ConfigError("statistics.bench_path (baseline mode) needs summary_mode 'xor'.")
        self.bench_path = config.section.get("bench_path")
        self.limit = config.section.get("diff_nums", 1)
        self.count = 0
        self._bench = {}  # (step, rank) -> the good run's data

    def tensor_seen(self, tensor, file_name, desc):
        self.sink.append((tensor, file_name, desc))  # no copy yet: most calls match the good run

    def _bench_data(self):
        context = self.context
        key = (context.current_step, context.rank)
        if key not in self._bench:
            path = self.bench_path
            if os.path.isdir(path):
                path = os.path.join(path, f"step{key[0]}", rank_dir_name(key[1]), "dump.json")
            try:
                with open(path, encoding="utf-8") as handle:
                    self._bench[key] = json.load(handle).get("data", {})
            except (OSError, ValueError) as error:
                logger.warning(f"msprobe baseline: cannot read the good run's dump '{path}' ({error}); "
                               "this step is not compared.")
                self._bench[key] = {}
        return self._bench[key]

    def admit(self, record):
        if self.count >= self.limit or record.name not in (bench := self._bench_data()):
            return True
        context = self.context
        context.resolve()  # fingerprints still on a device are needed now
        if _prints(record.entry) == _prints(bench[record.name]):
            return True
        adapter = context.adapter
        for tensor, file_name, desc in record.tensors:
            if adapter.fingerprints_now([tensor])[0] == desc.get(FINGERPRINT_KEY):
                desc["data_name"] = file_name
                context.save(tensor, file_name)
        if isinstance(record.entry, dict):
            record.entry["bench_differs"] = True
        self.count += 1
        logger.warning(f"msprobe baseline: {record.name} differs from the good run "
                       f"({self.count}/{self.limit} saved with its tensors).")
        return True


def _prints(node):
    """The fingerprints of every tensor descriptor under node, in order."""
    if isinstance(node, (list, tuple)):
        return [p for item in node for p in _prints(item)]
    if isinstance(node, dict):
        if "type" in node:
            return [node.get(FINGERPRINT_KEY)] if FINGERPRINT_KEY in node else []
        return [p for key, item in node.items() if key != "rng" for p in _prints(item)]
    return []
