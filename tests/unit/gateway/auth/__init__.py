"""Unit tests of gateway SASL authentication."""
