"""``python -m breakeven`` works like the ``breakeven`` command."""

from breakeven.cli import main

if __name__ == "__main__":
    main()
