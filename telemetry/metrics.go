package telemetry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// StageBuckets are the rolecall.stage.duration bucket bounds in seconds:
// 1-2.5-5 steps from 5 µs (a cached discovery lookup, a resolve) to 10 s (a
// publish waiting on a struggling cluster).
var StageBuckets = []float64{
	0.000005, 0.00001, 0.000025, 0.00005,
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5, 10,
}

// Instruments are the worker's metric instruments (docs/OPERATIONS.md lists
// them with their Prometheus names).
type Instruments struct {
	// Tasks counts finished tasks ("rolecall.tasks"), with the attributes
	// outcome and code; see TaskDone.
	Tasks metric.Int64Counter
	// StageDuration is the time per pipeline stage in seconds
	// ("rolecall.stage.duration"), with the attribute stage; see StageDone.
	StageDuration metric.Float64Histogram
	// Inflight is the number of tasks being processed ("rolecall.inflight"):
	// taken and not yet acked or nak'ed. It reports only through the
	// callbacks given to ObserveInflight, which read the count a worker
	// keeps anyway, so a task costs it nothing (an Add on taking and on
	// finishing each task was two of a task's eight metric updates).
	Inflight metric.Int64ObservableUpDownCounter
	// Pending is the consumer backlog ("rolecall.consumer.pending"); it
	// reports only through the callback given to ObservePending.
	Pending metric.Int64ObservableGauge
	// PendingStale is 1 while the backlog could not be read
	// ("rolecall.consumer.pending.stale"); it reports with Pending.
	PendingStale metric.Int64ObservableGauge
	// ConfigProblems is the number of problems in the configuration being
	// served ("rolecall.config.problems"); see ObserveConfigProblems.
	ConfigProblems metric.Int64ObservableGauge
	// SlowConsumers counts the NATS client's slow-consumer reports
	// ("rolecall.nats.slow_consumers").
	SlowConsumers metric.Int64Counter

	meter metric.Meter
	// Attribute sets are built once per value: the set of outcomes, codes and
	// stages is small, and building a set allocates on every call otherwise.
	// The option slices are stored whole so the variadic call does not
	// allocate one either.
	taskAttrs  sync.Map // taskKey -> []metric.AddOption
	stageAttrs sync.Map // string -> []metric.RecordOption, other stages
	// knownStages holds the options of the stages in stageNames, made up
	// front: a task records five durations, and scanning five names is
	// cheaper than a sync.Map lookup.
	knownStages [len(stageNames)][]metric.RecordOption
}

// stageNames are the stages a task records, in the order of knownStages.
var stageNames = [...]string{StageDecode, StageDiscover, StageResolve, StageMaterialize, StagePublish}

func stageOption(stage string) []metric.RecordOption {
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String(MetricAttrStage, stage)))}
}

type taskKey struct{ outcome, code string }

// NewInstruments creates the instruments on mp's rolecall meter.
func NewInstruments(mp metric.MeterProvider) (*Instruments, error) {
	m := mp.Meter(ScopeName)
	i := &Instruments{meter: m}
	for k, st := range stageNames {
		i.knownStages[k] = stageOption(st)
	}
	var err error
	if i.Tasks, err = m.Int64Counter(MetricTasks,
		metric.WithDescription("Tasks finished, by outcome (resolved, failed, retry, duplicate) and failure code."),
		metric.WithUnit("{task}")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricTasks, err)
	}
	if i.StageDuration, err = m.Float64Histogram(MetricStageDuration,
		metric.WithDescription("Time spent in one pipeline stage of one task."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(StageBuckets...)); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricStageDuration, err)
	}
	if i.Inflight, err = m.Int64ObservableUpDownCounter(MetricInflight,
		metric.WithDescription("Tasks taken from the consumer and not yet acked or nak'ed."),
		metric.WithUnit("{task}")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricInflight, err)
	}
	if i.Pending, err = m.Int64ObservableGauge(MetricConsumerPending,
		metric.WithDescription("Messages in the tasks stream not yet delivered to the shared consumer."),
		metric.WithUnit("{message}")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricConsumerPending, err)
	}
	if i.PendingStale, err = m.Int64ObservableGauge(MetricConsumerPendingStale,
		// No unit: "1" would make the Prometheus name end in _ratio.
		metric.WithDescription("1 while the consumer backlog could not be read; rolecall.consumer.pending then holds the last value read.")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricConsumerPendingStale, err)
	}
	if i.ConfigProblems, err = m.Int64ObservableGauge(MetricConfigProblems,
		metric.WithDescription("Problems worker validate reports for the configuration being served."),
		metric.WithUnit("{problem}")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricConfigProblems, err)
	}
	if i.SlowConsumers, err = m.Int64Counter(MetricSlowConsumers,
		metric.WithDescription("Slow-consumer reports of the NATS client: a subscription's buffer overflowed and messages were dropped."),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", MetricSlowConsumers, err)
	}
	return i, nil
}

// TaskDone counts one finished task. code is the failure code; it is left
// out when empty (resolved tasks, retries without a code).
func (i *Instruments) TaskDone(ctx context.Context, outcome, code string) {
	k := taskKey{outcome, code}
	opt, ok := i.taskAttrs.Load(k)
	if !ok {
		kvs := []attribute.KeyValue{attribute.String(MetricAttrOutcome, outcome)}
		if code != "" {
			kvs = append(kvs, attribute.String(MetricAttrCode, code))
		}
		opt, _ = i.taskAttrs.LoadOrStore(k, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kvs...))})
	}
	i.Tasks.Add(ctx, 1, opt.([]metric.AddOption)...)
}

// StageDone records how long one stage took.
func (i *Instruments) StageDone(ctx context.Context, stage string, d time.Duration) {
	if k := slices.Index(stageNames[:], stage); k >= 0 {
		i.StageDuration.Record(ctx, d.Seconds(), i.knownStages[k]...)
		return
	}
	opt, ok := i.stageAttrs.Load(stage)
	if !ok {
		opt, _ = i.stageAttrs.LoadOrStore(stage, stageOption(stage))
	}
	i.StageDuration.Record(ctx, d.Seconds(), opt.([]metric.RecordOption)...)
}

// ObserveInflight registers f as a source of rolecall.inflight: f
// returns the number of tasks one worker holds, and runs on every
// collection. The values of several registrations add up (one process,
// several workers). Unregister the returned registration when the worker
// stops.
func (i *Instruments) ObserveInflight(f func() int64) (metric.Registration, error) {
	return i.observe(MetricInflight, i.Inflight, f)
}

// ObservePending registers f as the source of rolecall.consumer.pending. f
// runs on every collection (each Prometheus scrape, each OTLP export
// interval) and the collection waits for it, so it should answer from a
// recent sample or a short consumer-info call bounded by ctx. It returns
// false when it has no value (not connected, or the broker did not answer
// in time): then rolecall.consumer.pending.stale is 1 and the pending gauge
// repeats the last value f gave, or is left out if it never gave one.
// Unregister the returned registration to stop observing.
func (i *Instruments) ObservePending(f func(ctx context.Context) (int64, bool)) (metric.Registration, error) {
	var (
		mu   sync.Mutex
		last int64
		have bool
	)
	reg, err := i.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		n, ok := f(ctx)
		mu.Lock()
		defer mu.Unlock()
		var stale int64
		switch {
		case ok:
			last, have = n, true
		case have:
			n, stale = last, 1
		default:
			o.ObserveInt64(i.PendingStale, 1)
			return nil
		}
		o.ObserveInt64(i.Pending, n)
		o.ObserveInt64(i.PendingStale, stale)
		return nil
	}, i.Pending, i.PendingStale)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s callback: %w", MetricConsumerPending, err)
	}
	return reg, nil
}

// ObserveConfigProblems registers f as the source of
// rolecall.config.problems: the number of problems of the configuration
// being served, read on every collection (so f must not load anything).
func (i *Instruments) ObserveConfigProblems(f func() int64) (metric.Registration, error) {
	return i.observe(MetricConfigProblems, i.ConfigProblems, f)
}

// SlowConsumer counts one slow-consumer report of the NATS client.
func (i *Instruments) SlowConsumer(ctx context.Context) { i.SlowConsumers.Add(ctx, 1) }

// observe registers f as a source of the asynchronous instrument inst
// (named name).
func (i *Instruments) observe(name string, inst metric.Int64Observable, f func() int64) (metric.Registration, error) {
	reg, err := i.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(inst, f())
		return nil
	}, inst)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s callback: %w", name, err)
	}
	return reg, nil
}
