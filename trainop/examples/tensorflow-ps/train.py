"""The Chief of a TF2 parameter-server training (ParameterServerStrategy): the only code of the job.

The PS and the Worker run nothing but a tf.distribute.Server (the operator's default server). This
process creates the variables, which the strategy places on the PS, and schedules training steps on the
Worker through a ClusterCoordinator; the steps read and update the variables on the PS over gRPC.
Logistic regression on a synthetic two-class problem from a fixed seed. Exits 1 when the test accuracy
misses ACCURACY_TARGET or a variable is not on the parameter server. RESULT_PATH (optional): a JSON result.
"""

import json
import os
import socket
import sys
import time

import tensorflow as tf

STEPS = 300
BATCH = 64
LEARNING_RATE = 0.5
TRUE_W = [[2.0], [-3.0]]
TRUE_B = 0.5
WAIT_FOR_SERVERS_SECONDS = 300


def say(message):
    print(f"chief: {message}", flush=True)


def examples(seed, n):
    """n points of the problem: label 1 where 2*x0 - 3*x1 + 0.5 > 0."""
    x = tf.random.stateless_normal([n, 2], seed=[seed, 0])
    y = tf.cast(tf.matmul(x, TRUE_W) + TRUE_B > 0, tf.float32)
    return x, y


def wait_for(address):
    """The servers start while this process does: wait until each one accepts connections."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + WAIT_FOR_SERVERS_SECONDS
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main():
    target = float(os.environ.get("ACCURACY_TARGET", "0.95"))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster = resolver.cluster_spec().as_dict()
    for task in ("ps", "worker"):
        for address in cluster.get(task, []):
            wait_for(address)
    say(f"cluster {json.dumps(cluster, sort_keys=True)}: every server accepts connections")

    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(tf.zeros([2, 1]), name="w")
        b = tf.Variable(0.0, name="b")
    devices = sorted({w.device, b.device})
    say(f"variables on {', '.join(devices)}")

    def dataset_fn():
        x, y = examples(seed=1, n=4096)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=2).repeat().batch(BATCH)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(lambda _: dataset_fn())

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    @tf.function
    def step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
            grad_w, grad_b = tape.gradient(loss, [w, b])
            w.assign_sub(LEARNING_RATE * grad_w)
            b.assign_sub(LEARNING_RATE * grad_b)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(STEPS)]
    coordinator.join()
    first, last = float(losses[0].fetch()), float(losses[-1].fetch())
    say(f"{STEPS} steps on {len(cluster.get('worker', []))} worker(s): loss {first:.3f} -> {last:.3f}")

    x, y = examples(seed=7, n=2000)
    predicted = tf.cast(tf.matmul(x, w) + b > 0, tf.float32)
    accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
    on_ps = all("/job:ps" in d for d in devices)
    if os.environ.get("RESULT_PATH"):
        with open(os.environ["RESULT_PATH"], "w") as f:
            json.dump(
                {
                    "accuracy": accuracy,
                    "target": target,
                    "steps": STEPS,
                    "first_loss": first,
                    "last_loss": last,
                    "variable_devices": devices,
                    "cluster": cluster,
                },
                f,
            )
    if not on_ps:
        say(f"FAILED: the variables are on {devices}, not on the parameter server")
        return 1
    if accuracy < target:
        say(f"FAILED: test accuracy {accuracy:.3f} < target {target}")
        return 1
    say(f"test accuracy {accuracy:.3f} >= target {target}: trained on the parameter server")
    return 0


if __name__ == "__main__":
    sys.exit(main())
