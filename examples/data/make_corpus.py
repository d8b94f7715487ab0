"""Regenerate corpus.txt: original English prose built from templates.

Everything here (templates and word lists) was written for this repository,
so the generated text is free to ship. The output is deterministic:

    python examples/data/make_corpus.py
"""

import os
import random

SEED = 1234
TARGET_BYTES = 90_000

NAMES = [
    "Ada", "Bram", "Cora", "Dev", "Elin", "Farid", "Greta", "Hugo", "Ines",
    "Jonah", "Kira", "Lars", "Mina", "Nils", "Oona", "Pavel", "Rosa", "Sami",
    "Tove", "Ulla", "Vera", "Wim", "Yara", "Zeno",
]
ROLES = [
    "baker", "ferryman", "clockmaker", "gardener", "teacher", "weaver",
    "lighthouse keeper", "miller", "carpenter", "fisher", "librarian",
    "beekeeper", "potter", "shepherd", "cartographer", "blacksmith",
]
PLACES = [
    "the harbour", "the old mill", "the market square", "the hill road",
    "the river bank", "the library", "the orchard", "the north field",
    "the stone bridge", "the bakery", "the workshop", "the lighthouse",
    "the pine forest", "the little station", "the school yard", "the quay",
]
TOWNS = [
    "Alder Cove", "Brackenford", "Cinder Hollow", "Dunmere", "Eastwick Green",
    "Fallowmoor", "Greywater", "Hollin Bay",
]
OBJECTS = [
    "a brass lantern", "a map of the coast", "a basket of apples",
    "a broken clock", "a bundle of letters", "a jar of honey", "a wooden box",
    "a blue scarf", "a coil of rope", "a loaf of bread", "a small compass",
    "a book of songs", "a pair of boots", "a kite with a long tail",
    "a tin of nails", "a painted cup",
]
WEATHER = [
    "The morning was grey and still.",
    "A cold wind came in from the sea.",
    "Rain fell softly on the roofs all afternoon.",
    "The sun rose early and the air smelled of cut grass.",
    "Fog lay over the water until noon.",
    "It was the first warm day of spring.",
    "Snow had fallen in the night, and the lanes were white and quiet.",
    "Clouds raced over the hills, and the light changed every minute.",
    "The evening was long and golden.",
    "Thunder rolled somewhere beyond the ridge.",
]
FEELINGS = [
    "glad", "tired", "curious", "worried", "calm", "restless", "hopeful",
    "proud", "puzzled", "cheerful",
]
ADJ = [
    "quiet", "narrow", "bright", "old", "crooked", "busy", "empty", "warm",
    "windy", "green", "steep", "crowded",
]
VERBS_PAST = [
    "walked to", "hurried to", "wandered down to", "climbed up to",
    "rode a bicycle to", "set out for", "returned to", "stopped at",
]
TASKS = [
    "mend the fishing nets", "count the sacks of flour", "paint the fence",
    "sort the old letters", "plant a row of beans", "fix the creaking door",
    "carry water to the garden", "sweep the floor", "tune the church bell",
    "write a long letter", "bake bread for the market", "repair a cart wheel",
]
SAYINGS = [
    "Slow hands make steady work.",
    "A full basket starts with one apple.",
    "The tide waits for no one, but it always comes back.",
    "If the road is long, sing a longer song.",
    "Every lantern was once a spark.",
    "Measure twice and cut once.",
    "A good neighbour is worth a wide field.",
    "Quiet water still turns the wheel.",
]
QUESTIONS = [
    "Have you seen the ferry this morning?",
    "Do you know where the key to the shed is?",
    "Will the rain stop before the market opens?",
    "Who left this on the doorstep?",
    "Can you help me carry this up the hill?",
    "What time does the last train leave?",
    "Is the bridge open again?",
    "Did you hear the bell last night?",
]
ANSWERS = [
    "I think so, but I cannot be sure.",
    "Not yet. Ask again after lunch.",
    "Yes, and it was late as usual.",
    "No one knows, and that is the strange part.",
    "Of course. Give me a moment to find my coat.",
    "Only if the wind stays down.",
    "It was there yesterday, by the window.",
    "Perhaps. The old ones always say it will.",
]
NUMBERS = [
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "twelve", "twenty",
]
SEASONS = ["spring", "summer", "autumn", "winter"]
TIMES = ["At dawn", "Before breakfast", "Around noon", "Late in the afternoon",
         "After supper", "Just before dark", "In the middle of the night"]


def sentence_bank(r):
    a, b = r.sample(NAMES, 2)
    role = r.choice(ROLES)
    place, place2 = r.sample(PLACES, 2)
    town = r.choice(TOWNS)
    obj = r.choice(OBJECTS)
    n = r.choice(NUMBERS)
    return [
        f"{a} was the {role} of {town}.",
        f"{r.choice(TIMES)}, {a} {r.choice(VERBS_PAST)} {place}.",
        f"There {a} met {b}, who was carrying {obj}.",
        f'"{r.choice(QUESTIONS)}" asked {a}.',
        f'"{r.choice(ANSWERS)}" said {b}.',
        f"{b} looked {r.choice(FEELINGS)} and said nothing for a while.",
        f"The {r.choice(ADJ)} path to {place2} was lined with {n} old trees.",
        f"Together they decided to {r.choice(TASKS)} before the day was over.",
        f"{a} remembered what the old {r.choice(ROLES)} used to say: {r.choice(SAYINGS)}",
        f"It took them {n} hours, and by the end they were {r.choice(FEELINGS)}.",
        f"In {r.choice(SEASONS)} the people of {town} liked to gather at {place}.",
        f"Nobody in {town} could explain why {obj} had been left at {place2}.",
        f"{b} wrote the day down in a notebook, as {b} always did.",
        f"Later, {a} went home along the {r.choice(ADJ)} road and felt {r.choice(FEELINGS)}.",
    ]


def paragraph(r):
    bank = sentence_bank(r)
    head = [r.choice(WEATHER), bank[0], bank[1]]
    # keep the story order of the bank, just skip some sentences
    keep = sorted(r.sample(range(2, len(bank)), r.randint(4, 8)))
    middle = [bank[i] for i in keep]
    return " ".join(head + middle)


def fact_paragraph(r):
    town = r.choice(TOWNS)
    k = r.randint(2, 9)
    lines = [f"Notes from {town}, week {r.randint(1, 52)}."]
    for _ in range(r.randint(3, 5)):
        name = r.choice(NAMES)
        lines.append(
            f"{name} the {r.choice(ROLES)} brought {r.choice(OBJECTS)} to {r.choice(PLACES)}."
        )
    lines.append(f"There were {k} boats in the harbour and {k + r.randint(1, 6)} carts on the road.")
    lines.append(r.choice(SAYINGS))
    return " ".join(lines)


def build(seed=SEED, target=TARGET_BYTES):
    r = random.Random(seed)
    parts = []
    size = 0
    chapter = 0
    while size < target:
        if chapter == 0 or r.random() < 0.08:
            chapter += 1
            parts.append(f"Chapter {chapter}\n")
        p = fact_paragraph(r) if r.random() < 0.2 else paragraph(r)
        parts.append(p + "\n")
        size += len(p) + 1
    return "\n".join(parts)


if __name__ == "__main__":
    text = build()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.txt")
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    print(f"wrote {path}: {len(text.encode('ascii'))} bytes")
