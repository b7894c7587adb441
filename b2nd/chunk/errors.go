package chunk

import "github.com/tileflight/tileflight/errkind"

func unsupportedErr(msg string) error { return errkind.Errorf(errkind.Unimplemented, "%s", msg) }
