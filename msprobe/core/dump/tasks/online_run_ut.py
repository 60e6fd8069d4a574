"""The online_run_ut task: stream each dumped API call to a run_ut bench side instead of writing a dump.

Selected by task "tensor" with `"online_run_ut": true`. Each forward call is sent when it has finished
(its dump.json entry plus the tensors of its inputs, snapshotted before the call, and of its outputs); its
backward entry (gradients of the outputs and of the inputs) follows when autograd has produced it. The bench
side (`msprobe -f pytorch run_ut -config ...` with `run_ut.is_online`) rebuilds from these exactly the case
offline run_ut reads from a tensor dump, and writes the same CSVs. Nothing is written under dump_path.

Sending runs on a background thread through a bounded queue (core/run_ut/online/sender.py): a bench side
that is down, refuses us or goes away costs one warning line, never an exception in the training script,
and the calls that could not be checked are counted and reported at exit.
"""
import atexit

from msprobe.core.config_fields import ONLINE_FIELDS, Field, boolean, unlisted
from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.errors import ConfigError
from msprobe.core.framework import get_framework
from msprobe.core.log import logger
from msprobe.core.run_ut.online import wire
from msprobe.core.run_ut.online.sender import CallSender
from msprobe.core.run_ut.online.tls import client_context, tls_files
from msprobe.core.run_ut.online.transport import TransportError, check_plain_tcp, open_channel

__all__ = ["OnlineRunUt"]


@register_task("online_run_ut")
class OnlineRunUt(Task):
    """task "tensor" with "online_run_ut": true — send every dumped API call to the run_ut bench side
    (docs/online_run_ut.md). Its keys live in the "tensor" section; scope, list and data_mode select the calls
    sent, top-level rank / step the ranks and steps (no process group: rank 0). With tls_path the folder holds
    client.key, client.crt and ca.crt; without it, plain TCP to a host other than loopback needs
    allow_plain_tcp. PyTorch only.
    """

    saves_tensors = False
    section = "tensor"
    selectable = False
    frameworks = ("pytorch",)
    config_fields = (Field("online_run_ut", boolean, False, "`true` sends every dumped API call to a run_ut bench "
                           "side instead of writing a dump", listed=False),) + ONLINE_FIELDS + unlisted(
        Field("online_run_ut_recompute", boolean, False, "the model recomputes activations: backward entries are "
              "not sent"))

    def __init__(self, context):
        super().__init__(context)
        section = dict(context.config.section)
        framework = context.adapter.framework
        self.pack_tensor = get_framework(framework).wire_packer()  # (snapshot, name) -> (blob meta, buffer)
        if self.pack_tensor is None:
            raise ConfigError(f"online_run_ut: not available for framework '{framework}' (PyTorch only).")
        if not section.get("nfs_path") and not (section.get("host") and section.get("port", -1) > 0):
            raise ConfigError("online_run_ut: set tensor.nfs_path (shared directory) or tensor.host and tensor.port "
                              "(the bench side's address).")
        self.section = section
        files = None if section.get("nfs_path") else tls_files(section.get("tls_path", ""), "client")
        self.tls_context = client_context(files) if files else None
        if section.get("nfs_path"):
            mode = f"shared folder {section['nfs_path']}"
        else:
            try:
                mode = check_plain_tcp(section["host"], files is not None, section.get("allow_plain_tcp", False),
                                       "online_run_ut")
            except TransportError as exc:
                raise ConfigError(str(exc)) from None
            mode = f"{section['host']}:{section['port']} ({mode})"
        logger.info("msprobe online run_ut: sending the calls to %s", mode)
        self.send_backward = not section.get("online_run_ut_recompute", False)
        self.sender = None
        self.seq = 0
        self.seq_of = {}  # forward call name of this step -> its message number
        self.sent_in_step = False
        atexit.register(self.close)  # after the collector's own exit flush (atexit runs in reverse order)

    # -- collector callbacks --------------------------------------------------------------------
    def tensor_seen(self, tensor, file_name, desc):
        desc["data_name"] = file_name  # the entry reads as a tensor dump's; the bench maps names to blobs
        self.sink.append((self.context.adapter.copy_for_save(tensor), file_name, desc))

    def admit(self, record):
        call = record.call
        if call is None or call.is_module or record.kind not in ("forward", "backward"):
            return False
        if record.kind == "backward" and not self.send_backward:
            return False
        self.context.resolve()  # statistics still on the device are needed in the JSON
        name = call.call_name
        header = {"kind": "call" if record.kind == "forward" else "backward", "rank": self._rank(),
                  "step": self.context.current_step, "name": name}
        if record.kind == "forward":
            self.seq_of[name] = header["seq"] = self.seq
            self.seq += 1
            header["forward"] = record.entry
            header["expects_backward"] = self.send_backward and _any_requires_grad(record.entry.get("output"))
        else:
            if name not in self.seq_of:
                return False
            header["seq"] = self.seq_of[name]
            header["backward"] = record.entry
        self._submit(header, record.tensors, is_call=record.kind == "forward")
        return False  # nothing goes to dump.json

    def step_end(self):
        if self.sent_in_step:
            self._submit({"kind": "step_end", "rank": self._rank(), "step": self.context.current_step}, [], False)
            self.sent_in_step = False

    def new_step(self):
        self.seq_of = {}

    # -- sending --------------------------------------------------------------------------------
    def _rank(self):
        rank = self.context.rank
        return 0 if rank is None else int(rank)

    def _sender(self):
        if self.sender is None:
            rank = self._rank()
            self.sender = CallSender(lambda: open_channel(self.section, rank, self.tls_context))
        return self.sender

    def _submit(self, header, tensors, is_call):
        metas, buffers = [], []
        for snapshot, file_name, _ in tensors:
            meta, buffer = self.pack_tensor(snapshot, file_name)
            metas.append(meta)
            buffers.append(buffer)
        header["blobs"] = wire.blob_table(metas)
        frames = wire.encode(header, buffers)
        self._sender().submit(frames, sum(memoryview(b).nbytes for b in frames), is_call)
        self.sent_in_step = True

    def close(self):
        """At exit: send what is queued and the end message, then say how many calls were not checked."""
        atexit.unregister(self.close)
        ranks = self.context.config.rank
        if self.sender is None and ranks and self._rank() not in ranks:
            return  # a rank that is not checked has nothing to end
        sender = self._sender()
        sender.close(wire.encode({"kind": "end", "rank": self._rank()}))


def _any_requires_grad(node):
    if isinstance(node, dict):
        return node.get("requires_grad") is True or any(_any_requires_grad(v) for v in node.values()
                                                         if isinstance(v, (dict, list, tuple)))
    if isinstance(node, (list, tuple)):
        return any(_any_requires_grad(item) for item in node)
    return False
