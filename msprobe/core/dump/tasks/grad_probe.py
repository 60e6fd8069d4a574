"""The grad_probe entry of the task registry: its config.json section (gradient monitoring has its own driver)."""
from msprobe.core.config_fields import Field, bounds, choice, string_list
from msprobe.core.dump.tasks import Task, register_task

__all__ = ["GradProbe"]


@register_task("grad_probe")
class GradProbe(Task):
    """task "grad_probe": at every optimizer step a summary of each parameter's gradient
    (`debugger.monitor(model)`, docs/grad_probe.md): max/min/norm (L0 also the MD5, L2 also the share of
    elements in each interval of `bounds`) and, at L1/L2, the sign of every element; two runs are compared
    with `msprobe grad_compare`.
    """

    collects = False
    config_fields = (
        Field("grad_level", choice("L0", "L1", "L2"), "L1",
              "`L0`: MD5 and max/min/norm; `L1`: + element signs; `L2`: + interval shares"),
        Field("param_list", string_list, [], "exact parameter names (empty: all)"),
        Field("bounds", bounds, [-1, 0, 1], "strictly increasing numbers that cut the value range into intervals (L2)"),
    )
