"""Precision bisection: the smallest set of modules whose upcast to float32 brings a metric back."""
