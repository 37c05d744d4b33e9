"""A population of trials: plan, driver, result; talks to the engine through a port."""
