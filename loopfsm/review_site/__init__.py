"""The review site: a page per machine (its diagram, branches, policy and invariants) and a simulator that
drives the real compiled machine, served on the loopback interface or written as static pages.

``loopfsm review`` builds it from the project's machines; nothing here reads the network or a clock.
"""
