"""Readers and writers every tool shares: xlsx and zip writing, float text, tensor files, dump.json loading.

The bottom layer of core: modules here import only core's base modules (errors, log, paths, naming, dump_paths,
native_switch), never a tool (compare, config_check, ckpt_compare, trend, parse, visualization) nor an adapter.
This package imports none of its modules, so importing one costs only that module.
"""
