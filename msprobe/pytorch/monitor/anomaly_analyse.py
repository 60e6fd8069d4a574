"""`python -m msprobe.pytorch.monitor.anomaly_analyse -d DIR`: the framework-neutral anomaly sorter, 1.2.1's path."""
import sys

from msprobe.core.monitor.anomaly_analyse import analyse_anomalies, main

__all__ = ["analyse_anomalies", "main"]

if __name__ == "__main__":
    sys.exit(main(prog="python -m msprobe.pytorch.monitor.anomaly_analyse"))
