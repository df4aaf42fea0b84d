"""Tests of ``deepstack``, the network model."""
