"""The interactive `parse` tool (framework-neutral): show, compare and look up dumped tensors."""
