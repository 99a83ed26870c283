package main

func cli(args []string) int { panic("not written yet") }
