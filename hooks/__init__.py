"""Metacontroller sync hooks: a job and its observed children in, desired children and status out."""
