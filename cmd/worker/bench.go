package main

import (
	"context"
	"errors"
)

type benchCmd struct{}

func (benchCmd) Run(context.Context, *globals) error {
	return errors.New("bench: not implemented yet")
}
