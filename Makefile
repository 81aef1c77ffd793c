# Convenience targets; the commands behind them work without make.

# Docker Compose v2 plugin if present, else the v1 program.
COMPOSE := $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.PHONY: image compose-config compose-up compose-down integration

# Build rolecall/worker:local and rolecall/nats-server:local from static
# binaries compiled here (FROM scratch: no registry needed).
image:
	go run ./integration/cmd/buildimages

compose-config:
	$(COMPOSE) -f docker-compose.yml config -q

compose-up: image
	$(COMPOSE) -f docker-compose.yml up -d

compose-down:
	$(COMPOSE) -f docker-compose.yml down -v

# The container suite alone, with its figures ("figures:" lines).
integration:
	go test ./integration -count=1 -v -timeout 15m
