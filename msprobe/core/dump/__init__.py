"""Framework-neutral data dump: collector, filters, record building, stack capture, writer.

How a framework plugs in
------------------------
1. Implement `DumpAdapter` (adapter.py): how to recognise a tensor, its descriptor header
   ({"type", "dtype", "shape"}), deferred statistics (`tensor_stats` returns a handle,
   `resolve_stats` converts a batch of handles at once), CRC-32, snapshot + save of tensor files,
   descriptors of framework-specific values (the rank comes from core/framework.py current_rank).
2. Create one `DumpCollector(config, adapter)` per debugger (config: `msprobe.core.config.DebuggerConfig`).
3. From the framework's hooks report events::

       collector.start(rank)                                   # debugger.start()
       call = collector.begin_forward("Functional.relu", args, kwargs)
       out = real_function(*args, **kwargs)
       collector.end_forward(call, out)
       ...                                                     # later, when grads arrived:
       collector.backward(call, grads_of_outputs, grads_of_inputs)
       collector.stop()                                        # debugger.stop(): writes JSON
       collector.next_step()                                   # debugger.step()

   Modules/Cells use `begin_forward("Module.l1.Linear", args, kwargs, is_module=True)`,
   `end_forward(call, out, parameters={"weight": w, ...})` and
   `parameters_grad("Module.l1.Linear", "weight", grad)`.

Output: `dump_path/step{N}/rank{R}/{dump,stack,construct}.json` and `dump_tensor_data/` (directory
`rank` without a number in a single process), the layout and schema of msprobe 1.2.1.
"""
from msprobe.core.dump.adapter import STAT_KEYS, DumpAdapter
from msprobe.core.dump.collector import DumpCollector, ForwardCall
from msprobe.core.dump.record import RecordBuilder, describe_plain
from msprobe.core.dump.stack import StackCapture
from msprobe.core.dump.writer import DumpWriter, rank_dir_name

__all__ = ["DumpAdapter", "STAT_KEYS", "DumpCollector", "ForwardCall", "RecordBuilder", "describe_plain",
           "StackCapture", "DumpWriter", "rank_dir_name"]
