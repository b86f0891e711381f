"""The phases of one slot-plan cycle, a module each (engine/cycle.py lists them in
order and runs them). Each module defines a mixin class with its phase's methods;
``Cycle`` inherits them all."""
