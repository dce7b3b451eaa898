"""Answer types: what a question asks for, and whether a text holds it.

Question answering before language models (the TREC QA systems: Moldovan et al., "The
Structure and Performance of an Open-Domain Question Answering System", ACL 2000; Hovy
et al., "Toward Semantics-Based Answer Pinpointing", HLT 2001) rests on one observation:
a question's wording says what kind of thing its answer is, and a passage that holds no
such thing does not answer it, however close its topic.  The rule, pinned (every list
below is part of it and hashed into :data:`RULES_SHA256`):

1. **What is asked** (:func:`answer_type`), from the question's first words, English,
   Portuguese and Spanish alike (accents folded; a journal mixes the three in one
   collection, and their question words do not collide):

   - *who / whom / whose / quem / quién* → ``person`` (a person's or a team's name);
   - *when / quando / cuándo*, and *what / which / que / qual / cuál* followed by a time
     noun (*time, date, day, year, hora, dia, fecha…*) → ``time``;
   - *where / onde / dónde*, and *which / que / qual* followed by a place noun (*city,
     street, restaurant, cidade, calle…*) → ``place``;
   - *how much / quanto / cuánto* → ``money`` when the question names a price
     (:data:`MONEY_CUES`: *cost, pay, price, rent, custou, precio…*), else ``quantity``;
     *how many / quantos / cuántos* → ``count`` (``duration`` when the thing counted is a
     unit of time or length, ``money`` when it is a currency, ``age`` for *quantos anos
     tem*); *how long, how far, quanto tempo* → ``duration``; *how old, que idade* →
     ``age``; *how often* → ``frequency``; *how big / tall / heavy…* → ``quantity``;
   - *what is … number / code* → ``code`` (anything with a digit); *what is the name of,
     como se chama, cómo se llama* → ``name``;
   - anything else (*what, which, why*) → ``any``: no type to check.  *Which X* / *what
     kind of X* records X, the thing asked for, which is no topic word of the question.

2. **What a text holds** (:func:`typed_tokens`): the tokens of each kind, never one the
   question itself contains (the answer to "who leads Orchard?" is not "Orchard"):

   - a *name* is a capitalised word that is not a function word, a calendar word or a
     time word; at the start of a sentence (where every word is capitalised) only when it
     is not written in lower case around it (:func:`lower_case_stems`), is no verb or adverb
     by its form (:data:`IRREGULAR_PAST`, :data:`NOTE_VERBS`, :data:`VERB_ENDINGS`), and the
     next word is not a function word ("Kenji leads" yes; "Bought a", "Neighbours complained"
     beside "the neighbour's cat", "Ask Marta" no);
   - ``person``: a name not after a place preposition ("at Bar Vesuvio" is a place), a
     kin or role noun (*mum, plumber, senhorio*), or a team (*the platform team*);
   - ``place``: a name, or a place preposition (*at, in, behind, no, na, en…*) followed
     within three words by a noun that is no time word ("in the garage", "no portal";
     not "in March", "in the evening");
   - ``time``: an ISO or numeric date, a clock time (8:15, 7pm, half past seven), a month
     or weekday name (English "May" and "March" only capitalised), a year, a season, a
     holiday, a relative day (today, tomorrow, amanhã, mañana…);
   - numbers: digits, or number words; a number word that is also an article or a
     preposition (*one, um, una, dos, once*) counts only before a unit.  Numbers inside a
     date, a clock time or an identifier (``XJ-900``) are none.  ``money``: a number next
     to a currency (€, euros, reais); ``duration``: a number before a unit of time or
     length; ``age``: a number after *turned, aged, fez, cumplió* or before *years old,
     anos, años*; ``count`` and ``quantity``: any number that is not an age, a time or a
     date; ``frequency``: *every, daily, twice, N times, cada, vezes, veces*; ``code``:
     any token with a digit.

3. **Titles and headings** are never an answer and never hold one: the caller leaves
   them out of the text it checks (a note's title is its file name or its first heading:
   "2025-01-08" answers nothing).

**Editions.**  The rule changes only by a new edition, so that an answer given under an older
one replays identically (as Lucene's analyzers keep a ``matchVersion``): each caller names the
edition it reads (:attr:`AnswerType.edition`, the ``edition`` argument), each edition is hashed
apart (:data:`EDITIONS`).  Edition 1 is extractive-v4's (issue 40).  Edition 2
(:data:`EDITION`, extractive-v5 and the model generators' check) adds:

- a meal after a time preposition is a time (*at breakfast*, *after dinner*, *ao almoço*,
  *después de la cena*: :data:`MEALS`, :data:`MEAL_PREPOSITIONS`), as a journal dates things;
- a name is a ``place`` only where it reads as one: after a place or direction preposition
  (*at, in, to, from, on, para, desde…*, :data:`DIRECTIONS`), or beside a place noun
  (*Kings Road*, *Rua Augusta*: :data:`PLACE_NAME_NOUNS`); "Kenji leads it" holds no place;
- *what is X's name* asks for a ``name`` as *what is the name of X* does;
- the words of *how long does X take / last* (:data:`DURATION_CUES`) say what is asked, as the
  money cues do, and are no topic word.

Edition 3 (extractive-v6; :data:`EDITION` stays 2, which the model generators' check reads) adds the
three fixes issue 40's third set called for:

- an ordinal or order word (*First, Second, Last, Next…*: :data:`ORDINAL_WORDS`) is no name ("First
  shift at the food bank." names nobody);
- *a / an / half* before a unit of time or length is a duration ("an hour and a half", "half an hour");
- *what kind / type / sort of X* leaves *kind* out of the topic, as it leaves X.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace

from .terms import CALENDAR, PRESENT, QUARTERS, STOP_WORDS, content_terms, fold, stem, terms

__all__ = [
    "AnswerType",
    "DESCRIPTIONS",
    "DURATION_CUES",
    "EDITION",
    "EDITIONS",
    "KINDS",
    "MONEY_CUES",
    "RULES_SHA256",
    "answer_type",
    "has_type",
    "lower_case_stems",
    "question_language",
    "topic_terms",
    "typed_tokens",
]


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: The edition callers read unless they name another (see the module docstring).
EDITION = 2


#: Every kind an answer may be asked to be, and how an abstention names it.
DESCRIPTIONS = {
    "person": "a person's or a team's name",
    "name": "a name",
    "time": "a date or a time",
    "clock": "a time of day",
    "place": "a place",
    "money": "an amount of money",
    "duration": "a duration or a distance",
    "age": "an age",
    "count": "a number",
    "quantity": "a number or an amount",
    "frequency": "how often",
    "code": "a number or a code",
    "any": "an answer",
}
KINDS = tuple(DESCRIPTIONS)

#: Question words that ask for a person (en, pt, es; accents folded).
PERSON_WORDS = _w("who whom whose quem quien quienes")
#: ... for a time, and for a place.
TIME_WORDS = _w("when quando cuando")
PLACE_WORDS = _w("where onde aonde donde adonde")
#: Words that may precede the question word ("With whom", "De onde", "¿A quién", "Since when").
LEAD_WORDS = _w("to with for from by since until till de da do com para por a con desde hasta ate em en")
#: Determiners that open a "which X" question.
WHICH_WORDS = _w("what which que qual quais cual cuales")
#: Nouns after WHICH_WORDS that make it a time or a place question.
TIME_NOUNS = _w("time date day days year month hour weekday hora horas dia data ano mes fecha")
PLACE_NOUNS = _w(
    """
    city town country place street address village neighbourhood neighborhood area restaurant hotel bar cafe
    shop store venue hospital school station airport beach island region
    cidade pais lugar local rua morada endereco bairro aldeia vila restaurante loja escola praia ilha
    ciudad pueblo calle direccion barrio tienda sitio escuela playa isla
    """
)
#: Time nouns that ask for a time of day, not a date ("what time", "a que horas", "a qué hora").
CLOCK_NOUNS = _w("time hour hours hora horas")
#: Nouns after WHICH_WORDS that ask for a number or a code, an age, a price, a name.
CODE_NOUNS = _w("number code id pin numero codigo")
AGE_NOUNS = _w("age idade edad")
MONEY_NOUNS = _w("price cost fee amount preco valor custo precio costo importe")
NAME_NOUNS = _w("name nome nombre")
#: "what kind of X": X is the thing asked for.
KIND_NOUNS = _w("kind type sort tipo clase especie")

#: Words that make "how much" a question about money (en, pt, es; folded).
MONEY_CUES = _w(
    """
    cost costs costed pay paid pays spend spent charge charged charges bill billed price priced fee fees budget
    worth earn earned sell sold rent salary wage fare money tip deposit refund owe owed
    custa custou custar custam custaram preco pagar pagou paguei pago gastar gastou gastei cobrar cobrou
    orcamento dinheiro renda aluguer aluguel salario vale valor vender vendi vendeu
    cuesta costo costar cuestan costaron precio pague gaste cobro presupuesto dinero alquiler renta
    sueldo vendio
    """
)
#: Words that make "how long" ask how long a thing takes or lasts (edition 2: no topic words of the question).
DURATION_CUES = _w(
    """
    take takes took taken taking last lasts lasted lasting
    leva levou levam levar demora demorou demorar dura durou durar
    tarda tardo tardar duro
    """
)
#: Units: currencies, time, length, mass/volume and other measures (folded).
CURRENCY = _w(
    """
    euro euros eur pound pounds quid gbp dollar dollars usd cent cents pence real reais brl libra libras dolar
    dolares peso pesos centimo centimos centavo centavos franc francs franco francos krona kronor krone kroner
    zloty yen yuan
    """
)
CURRENCY_SIGNS = frozenset("€£$¥")
TIME_UNITS = _w(
    """
    second seconds minute minutes min mins hour hours hr hrs h day days night nights week weeks fortnight
    fortnights month months year years decade decades
    segundo segundos minuto minutos hora horas dia dias noite noites semana semanas mes meses ano anos
    noche noches
    """
)
LENGTH_UNITS = _w(
    "km k m metre metres meter meters mile miles cm mm foot feet inch inches yard yards "
    "quilometro quilometros kilometro kilometros metro metros milla millas"
)
OTHER_UNITS = _w(
    "kg g gram grams kilo kilos litre litres liter liters l ml lb lbs ounce ounces oz tonne tonnes ton tons "
    "quilo quilos grama gramas gramo gramos litro litros percent degrees graus grados"
)
#: Words before a number that make it an age; after it, with "old" or alone in pt/es.
AGE_BEFORE = _w("turned turns turning aged age fez faz completou completa cumplio cumple")
AGE_AFTER = _w("old anos")

#: Cardinal number words (folded; compounds like "fifty-two" are split on the hyphen).
NUMBER_WORDS = _w(
    """
    zero two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million billion
    dozen half
    dois duas tres quatro cinco seis sete oito nove dez onze doze treze catorze quatorze quinze dezasseis dezesseis
    dezassete dezessete dezoito dezanove dezenove vinte trinta quarenta cinquenta sessenta setenta oitenta
    noventa cem cento duzentos trezentos quinhentos mil milhao milhoes duzia
    seis cuatro siete ocho nueve diez doce catorce quince trece dieciseis diecisiete dieciocho diecinueve veinte treinta cuarenta
    cincuenta sesenta ochenta cien ciento doscientos quinientos millon millones docena
    """
)
#: Number words that are also articles, pronouns or prepositions: a number only before a unit.
NUMBER_WORDS_BEFORE_UNIT = _w("one um uma un una uno dos once meia media")

#: Time words: months, weekdays (pt ones with "-feira"), seasons, holidays, parts of the day, relative days.
MONTHS = _w(
    """
    january february april june july august september october november december
    janeiro fevereiro marco abril maio junho julho agosto setembro outubro novembro dezembro
    enero febrero marzo mayo junio julio septiembre setiembre octubre noviembre diciembre
    """
)
#: English months that are also common words: a month only when capitalised.
MONTHS_CAPITALISED = _w("may march")
WEEKDAYS = _w(
    """
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays
    saturdays sundays weekend weekends
    segunda-feira terca-feira quarta-feira quinta-feira sexta-feira sabado domingo sabados domingos
    lunes martes miercoles jueves viernes
    """
)
TIME_OF_DAY = _w(
    """
    today tonight tomorrow yesterday morning afternoon evening night noon midday midnight dawn
    spring summer autumn winter easter christmas
    hoje amanha ontem manha tarde noite meio-dia meia-noite madrugada primavera verao outono inverno pascoa natal
    hoy manana ayer mediodia medianoche verano otono invierno pascua navidad
    """
)
#: Parts of the day: a time of day as a journal says it.
DAY_PARTS = _w(
    "morning afternoon evening night tonight noon midday midnight dawn manha tarde noite meio-dia meia-noite "
    "madrugada manana mediodia medianoche noche"
)
#: Edition 3: order words, never a name at a sentence's start ("First shift at the food bank.").
ORDINAL_WORDS = _w(
    """
    first second third fourth fifth last next final previous
    primeiro primeira segundo segunda terceiro terceira ultimo ultima proximo proxima
    primero primera tercero tercera postrero siguiente
    """
)
#: Edition 3: words that stand for "one" before a unit of time or length ("an hour", "half a day").
ONE_UNIT = _w("a an half")
#: Relative markers: "next week", "la semana que viene", "in three days", "two weeks ago".
TIME_RELATIVE = _w("next last ago proxima proximo passada passado pasada pasado que vem viene")

#: Place prepositions (en, pt, es): a noun phrase after one names where.
PLACE_PREPOSITIONS = _w(
    """
    at in inside outside behind near beside under above below opposite into onto across
    em no na nos nas num numa ao aos perto junto dentro fora atras
    en al cerca dentro fuera detras delante
    """
)
#: Edition 2: direction prepositions; a name after one, or after a place preposition, is a place ("flew to Porto").
DIRECTIONS = _w("to from on onto toward towards via para desde hacia")
#: Edition 2: nouns that make the name beside them a place ("Kings Road", "Rua Augusta", "Plaza Mayor").
PLACE_NAME_NOUNS = _w(
    """
    street road lane avenue square park station airport bridge
    rua avenida praca largo travessa calle plaza paseo
    """
)
#: Edition 2: meals, a time when a time preposition comes before them ("at breakfast", "depois do jantar").
MEALS = _w(
    """
    breakfast brunch lunch lunchtime dinner dinnertime supper teatime
    pequeno-almoco almoco jantar lanche ceia
    desayuno almuerzo comida cena merienda
    """
)
MEAL_PREPOSITIONS = _w(
    "at after before during over by until since ao depois antes durante apos ate en despues tras hasta"
)

#: Nouns that name a person by kin or role (a "who" answer as a journal writes it).
PERSON_NOUNS = _w(
    """
    mum mom mother dad father parents brother sister son daughter wife husband partner grandma grandpa granny
    grandmother grandfather aunt uncle cousin niece nephew friend neighbour neighbor colleague boss manager
    teacher doctor dentist nurse vet plumber electrician mechanic builder landlord landlady lawyer
    mae pai pais irmao irma filho filha mulher marido avo avos tia tio primo prima amigo amiga vizinho vizinha
    colega chefe professor professora medico medica dentista enfermeiro enfermeira veterinario canalizador
    eletricista mecanico senhorio senhoria advogado
    madre padre padres hermano hermana hijo hija esposa esposo abuelo abuela tio tia vecino vecina jefe
    profesor profesora doctora enfermera fontanero electricista administrador administradora casero abogado
    """
)
#: More people by their trade, after WHICH_WORDS ("Which surgeon operated?").
PROFESSION_NOUNS = _w(
    """
    surgeon physiotherapist physio therapist pharmacist engineer technician gardener cleaner babysitter nanny coach
    trainer tutor instructor conductor producer director architect accountant agent driver
    cirurgiao fisioterapeuta terapeuta farmaceutico engenheiro tecnico jardineiro treinador explicador maestro
    produtor realizador arquiteto contabilista motorista
    cirujano fisioterapeuta farmaceutico ingeniero tecnico jardinero entrenador director arquitecto contable
    conductor
    """
)
TEAM_NOUNS = _w("team squad crew group committee department staff equipa equipe grupo comite departamento equipo")
#: Frequency words.
FREQUENCY_WORDS = _w(
    """
    every each daily weekly monthly yearly annually nightly hourly once twice always never usually
    cada diariamente semanalmente mensalmente anualmente sempre nunca vezes
    diario semanal mensual anual siempre veces
    """
)

_TOKEN = re.compile(r"[^\W_]+(?:['’.,:/\-][^\W_]+)*|[€£$¥%]")
_POSSESSIVE = re.compile(r"['’]s?$")
_LETTERS = re.compile(r"[^\W\d_]+")
_ISO_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
_NUM_DATE = re.compile(r"\d{1,2}[/.\-]\d{1,2}(?:[/.\-]\d{2,4})?")
_CLOCK = re.compile(r"\d{1,2}[:h]\d{2}|\d{1,2}(?:am|pm|h)")
_YEAR = re.compile(r"(?:19|20)\d{2}s?")
_ORDINAL = re.compile(r"\d{1,2}(?:st|nd|rd|th|º|ª)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NUMBER_UNIT = re.compile(r"(\d+(?:[.,]\d+)*)([^\W\d_]+)")
_IDENTIFIER = re.compile(r"[^\W\d_]+[\-_]?\d[\w\-]*|\d+[\-_][^\W\d_][\w\-]*")

FUNCTION_WORDS = STOP_WORDS | _w(
    """
    the a an my our his her their this that these those somebody someone everybody everyone nobody anybody
    anyone something nothing everything anything alguem ninguem alguien nadie algo nada tudo todo todos todas
    vai vao vamos va van
    """
)
#: Sentence-initial words that are verbs, not names: common English irregular past forms ...
IRREGULAR_PAST = _w(
    """
    went ran took bought sold paid met got made had did came saw gave left found felt kept told thought brought
    caught taught lost won spent sent built began wrote read ate drank slept swam drove rode flew fell broke
    chose spoke stole wore forgot heard held meant put set cut hit let quit shut sat stood woke became grew knew
    threw drew hung fed lent lit spun stuck tore sang rang sank shook wept
    """
)
#: ... the base forms of verbs a note opens with as a reminder ("Ask Marta…", "Bring the card") ...
NOTE_VERBS = _w(
    """
    ask bring buy call check email find get give keep let look make meet need pay phone pick put remember send
    take tell text try use visit write book order fix plan start stop see
    """
)
#: ... and endings of verbs and adverbs (en -ed -ing -ly; pt/es past tenses), on words of five letters or more.
VERB_ENDINGS = ("ed", "ing", "ly", "ei", "ou", "amos", "emos", "imos", "aram", "eram", "iram", "aron", "ieron")


@dataclass(frozen=True)
class AnswerType:
    """What a question asks for: a kind of :data:`KINDS`, the words that said so, and the thing asked for."""

    kind: str
    #: The question's words that set the kind, folded ("how much", "cuando"); "" for ``any``.
    cue: str = ""
    #: "Which X" / "what kind of X": X, folded; the thing asked for, not a topic word.
    noun: str | None = None
    #: The edition of the rule it was read under; :func:`topic_terms` reads the question under the same one.
    edition: int = field(default=EDITION, repr=False)

    def describe(self) -> str:
        """How an abstention names what it looked for: "a date or a time"."""
        return DESCRIPTIONS[self.kind]


def _start(t: list[str]) -> int:
    """Index of the question word: past leading prepositions ("With whom", "De onde", "A que horas")."""
    i = 0
    while i < len(t) - 1 and t[i] in LEAD_WORDS:
        i += 1
    return i


def answer_type(question: str, edition: int = EDITION) -> AnswerType:
    """The kind of answer ``question`` asks for (rule 1), under ``edition``.

    >>> [answer_type(q).kind for q in ("Who leads Orchard?", "¿Cuándo sale?", "Onde fica?", "How much did it cost?")]
    ['person', 'time', 'place', 'money']
    >>> answer_type("Which instrument is Zebulon learning?")
    AnswerType(kind='any', cue='', noun='instrument')
    """
    return replace(_answer_type(terms(question), edition), edition=edition)


def _answer_type(t: list[str], edition: int) -> AnswerType:
    if not t:
        return AnswerType("any")
    i = _start(t)
    w = t[i]
    nxt = t[i + 1] if i + 1 < len(t) else ""
    if w in PERSON_WORDS:
        return AnswerType("person", w)
    if w in TIME_WORDS:
        return AnswerType("time", w)
    if w in PLACE_WORDS:
        return AnswerType("place", w)
    if w == "how" and nxt:
        rest = set(t[i + 2 :])
        if nxt == "much":
            money = bool(rest & MONEY_CUES)
            return AnswerType("money" if money else "quantity", "how much")
        if nxt == "many":
            return _counted(t, i + 2, "how many")
        if nxt in ("long", "far"):
            return AnswerType("duration", f"how {nxt}")
        if nxt == "old":
            return AnswerType("age", "how old")
        if nxt == "often":
            return AnswerType("frequency", "how often")
        if nxt in _w("big tall heavy wide deep high fast hot cold warm large small"):
            return AnswerType("quantity", f"how {nxt}")
        return AnswerType("any")
    if w in ("quanto", "quanta", "cuanto", "cuanta"):
        if nxt in ("tempo", "tiempo"):
            return AnswerType("duration", f"{w} {nxt}")
        rest = set(t[i + 1 :])
        return AnswerType("money" if rest & MONEY_CUES else "quantity", w)
    if w in ("quantos", "quantas", "cuantos", "cuantas"):
        return _counted(t, i + 1, w)
    if w == "como" and nxt in ("se", "te") and i + 2 < len(t) and t[i + 2] in ("chama", "llama"):
        return AnswerType("name", f"{w} {nxt} {t[i + 2]}")
    if w in WHICH_WORDS:
        return _which(t, i, edition)
    return AnswerType("any")


def _which(t: list[str], i: int, edition: int) -> AnswerType:
    """ "Which X …" names X, the thing asked for; "what is … number", "qual é o nome de …" ask for a code, a name."""
    w = t[i]
    noun = t[i + 1] if i + 1 < len(t) and t[i + 1] not in FUNCTION_WORDS else None
    if w == "what" and noun is not None and noun.endswith("ed"):
        noun = None  # "What caused XJ-900?", "What happened to…": a verb, not the thing asked for
    if noun in KIND_NOUNS and i + 3 < len(t) and t[i + 2] in ("of", "de"):
        return AnswerType("any", "", t[i + 3])
    if noun is None:
        rest = t[i + 1 :]
        for k, x in enumerate(rest):
            if x in CODE_NOUNS:
                return AnswerType("code", f"{w} … {x}")
            if x in NAME_NOUNS and rest[k + 1 : k + 2] and rest[k + 1] in ("of", "do", "da", "de", "del"):
                return AnswerType("name", f"{w} … {x}")
            if x in NAME_NOUNS and k == len(rest) - 1 and edition >= 2:
                return AnswerType("name", f"{w} … {x}")  # "What is the boiler engineer's name?"
        return AnswerType("any")
    if noun in CLOCK_NOUNS:
        return AnswerType("clock", f"{w} {noun}", noun)  # "what time", "a que horas": a time of day, not a date
    for nouns, kind in (
        (TIME_NOUNS, "time"),
        (PLACE_NOUNS, "place"),
        (AGE_NOUNS, "age"),
        (MONEY_NOUNS, "money"),
        (PERSON_NOUNS | PROFESSION_NOUNS, "person"),  # "which surgeon", "que professor": a person
    ):
        if _singular(noun) & nouns:
            return AnswerType(kind, f"{w} {noun}", noun)
    if noun in CODE_NOUNS:
        return AnswerType("code", f"{w} {noun}", noun)
    if noun in NAME_NOUNS:
        return AnswerType("name", f"{w} {noun}", noun)
    return AnswerType("any", "", noun)


def _singular(noun: str) -> set[str]:
    """``noun`` and the singulars it may be the plural of (cities, ciudades, lugares, hours)."""
    out = {noun}
    if noun.endswith("ies"):
        out.add(noun[:-3] + "y")
    if noun.endswith("es"):
        out.add(noun[:-2])
    if noun.endswith("s"):
        out.add(noun[:-1])
    return out


def _counted(t: list[str], j: int, cue: str) -> AnswerType:
    """ "How many X": a count, unless X is a unit of time or length (a duration), a currency, or years of age."""
    noun = t[j] if j < len(t) else None
    if noun in TIME_UNITS or noun in LENGTH_UNITS:
        if noun in ("years", "anos") and set(t[j + 1 :]) & _w("old tem tens tinha tiene tienes tenia"):
            return AnswerType("age", f"{cue} {noun}")
        return AnswerType("duration", f"{cue} {noun}", noun)
    if noun in CURRENCY:
        return AnswerType("money", f"{cue} {noun}")
    return AnswerType("count", cue, noun)


@dataclass(frozen=True)
class _Tok:
    text: str  # as written
    low: str  # folded
    initial: bool  # first word of its sentence
    comma: bool = False  # a comma follows it
    common: bool = False  # its stem is written in lower case elsewhere: a common word, not a name
    meal: bool = False  # edition 2: a meal after a time preposition ("at breakfast"), a time
    ordinal: bool = False  # edition 3: an order word ("First", "Next"), never a name


def _tokens(text: str, common: frozenset[str] = frozenset(), edition: int = EDITION) -> list[_Tok]:
    out: list[_Tok] = []
    boundary = True
    for m in _TOKEN.finditer(text):
        raw = m.group(0)
        tail = text[m.end() : m.end() + 2]
        low = _POSSESSIVE.sub("", fold(raw))  # "Mum's" is "mum" to every rule
        meal = edition >= 2 and low in MEALS and any(t.low in MEAL_PREPOSITIONS for t in out[-3:])
        ordinal = edition >= 3 and low in ORDINAL_WORDS
        out.append(_Tok(raw, low, boundary, tail.startswith(","), stem(low) in common, meal, ordinal))
        boundary = (
            bool(tail) and tail[0] in ".!?:;\n" and not (tail[0] == "." and raw.lower() in _w("dr mr mrs ms st sr sra"))
        )
    return out


def _is_unit(tok: _Tok | None, units: frozenset[str]) -> bool:
    return tok is not None and (tok.low in units or (tok.text in CURRENCY_SIGNS and units is CURRENCY))


def _number(toks: list[_Tok], i: int) -> bool:
    """Whether token ``i`` is a number (rule 2): digits, or a number word (an ambiguous one only before a unit)."""
    tok = toks[i]
    if _NUMBER.fullmatch(tok.low) or _NUMBER_UNIT.fullmatch(tok.low):
        return True
    if tok.low in ("cento", "ciento") and i and toks[i - 1].low in ("por", "per"):
        return False  # "por cento", "por ciento": per cent, not a hundred
    parts = tok.low.split("-")
    if all(p in NUMBER_WORDS or p in NUMBER_WORDS_BEFORE_UNIT for p in parts) and any(p in NUMBER_WORDS for p in parts):
        return True
    if tok.low in NUMBER_WORDS_BEFORE_UNIT:
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        return nxt is not None and any(_is_unit(nxt, u) for u in (CURRENCY, TIME_UNITS, LENGTH_UNITS, OTHER_UNITS))
    return False


def _unit_after(toks: list[_Tok], i: int, units: frozenset[str]) -> bool:
    """A unit of ``units`` right after token ``i`` (or glued to it: "5km", "45€"), skipping a hyphenated number."""
    m = _NUMBER_UNIT.fullmatch(toks[i].low)
    if m and m.group(2) in units:
        return True
    j = i + 1
    while j < len(toks) and _number(toks, j) and j - i < 3:  # "one hour fifty-two minutes", "dois mil euros"
        j += 1
    return j < len(toks) and _is_unit(toks[j], units)


def _time_at(toks: list[_Tok], i: int) -> bool:
    """Whether token ``i`` is (part of) a time expression (rule 2)."""
    tok = toks[i]
    low = tok.low
    if _ISO_DATE.fullmatch(low) or _CLOCK.fullmatch(low) or _ORDINAL.fullmatch(low):
        return True
    if _NUM_DATE.fullmatch(low) and not _NUMBER.fullmatch(low):
        return True
    if _YEAR.fullmatch(low) and not _unit_after(toks, i, CURRENCY | OTHER_UNITS | LENGTH_UNITS):
        return True
    if low in MONTHS or low in WEEKDAYS or low in TIME_OF_DAY or tok.meal:
        return True
    if low in MONTHS_CAPITALISED and tok.text[:1].isupper():
        return True
    prev = toks[i - 1].low if i else ""
    nxt = toks[i + 1].low if i + 1 < len(toks) else ""
    if low in TIME_UNITS and (prev in TIME_RELATIVE or nxt in TIME_RELATIVE):
        return True  # "next week", "two days ago", "la semana que viene"
    # "half past seven", "seis de la manana" (manana is a time word), "at eight": a number after a clock word.
    if not _number(toks, i) or _unit_after(toks, i, CURRENCY | TIME_UNITS | LENGTH_UNITS | OTHER_UNITS):
        return False
    return prev in _w("past at as las") or nxt in _w("oclock o'clock am pm")


def _clock_at(toks: list[_Tok], i: int) -> bool:
    """A time of day: a clock time (8:15, 7pm, 9h30, "half past seven", "a las seis"), or a part of the day."""
    low = toks[i].low
    if _CLOCK.fullmatch(low) or low in DAY_PARTS:
        return True
    return _time_at(toks, i) and _number(toks, i)  # "at eight", "half past seven", "às 9"


def _name_at(toks: list[_Tok], i: int) -> bool:
    """A capitalised word that is no function, calendar or time word; sentence-initially only before a content word."""
    tok = toks[i]
    if not tok.text[:1].isupper() or tok.low in FUNCTION_WORDS or tok.low in CALENDAR or _time_at(toks, i):
        return False
    if tok.ordinal:
        return False
    if tok.low in PERSON_WORDS | TIME_WORDS | PLACE_WORDS | WHICH_WORDS:
        return False
    if tok.initial:
        # Every first word is capitalised: a name only if it reads like one: not a word written in lower case
        # elsewhere ("Neighbours complained" beside "the neighbour's cat"), not a verb ("Booked flights",
        # "Comprei 2 kg", "Ask Marta") or an adverb ("Weekly sync"), and not followed by a function word.
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if (
            tok.common
            or tok.low in IRREGULAR_PAST
            or tok.low in NOTE_VERBS
            or (len(tok.low) >= 5 and tok.low.endswith(VERB_ENDINGS))
        ):
            return False
        return tok.comma or (nxt is not None and not nxt.initial and nxt.low not in FUNCTION_WORDS)
    return True


def _after_place_preposition(toks: list[_Tok], i: int, prepositions: frozenset[str] = PLACE_PREPOSITIONS) -> bool:
    """Token ``i`` follows a place preposition within three words ("at the riverside canteen", "no portal")."""
    for j in range(max(0, i - 3), i):
        if toks[j].low in prepositions and all(
            toks[k].low in FUNCTION_WORDS or _name_at(toks, k) or k == i for k in range(j + 1, i + 1)
        ):
            return True
    return False


def typed_tokens(
    kind: str,
    text: str,
    question_terms: frozenset[str] = frozenset(),
    common: frozenset[str] = frozenset(),
    edition: int = EDITION,
) -> list[str]:
    """The tokens of ``text`` of ``kind`` (rule 2, under ``edition``), as written, leaving out the question's own terms.

    ``common``: stems of words written in lower case around the text (the passages, the question);
    a sentence's first word with one of them is a common word, not a name.

    >>> typed_tokens("money", "Budget is 720 euros.")
    ['720']
    >>> typed_tokens("person", "Kickoff for Orchard: Kenji leads it.", frozenset({"orchard"}))
    ['Kenji']
    >>> typed_tokens("time", "2025-01-08 Bring the insurance card.")
    ['2025-01-08']
    """
    if kind == "any":
        return []
    toks = _tokens(text, common, edition)
    out: list[str] = []
    for i, tok in enumerate(toks):
        if tok.low in question_terms or any(
            p in question_terms for p in tok.low.split("-") if len(p) > 2 and not p.isdigit()
        ):
            continue
        if _holds(kind, toks, i, edition):
            out.append(tok.text)
    return out


def _place_name(toks: list[_Tok], i: int) -> bool:
    """Edition 2: name ``i`` reads as a place: after a place or direction preposition, or beside a place noun."""
    beside = [toks[j].low for j in (i - 1, i + 1) if 0 <= j < len(toks)]
    return _after_place_preposition(toks, i, PLACE_PREPOSITIONS | DIRECTIONS) or not PLACE_NAME_NOUNS.isdisjoint(beside)


def _holds(kind: str, toks: list[_Tok], i: int, edition: int) -> bool:
    tok = toks[i]
    if kind == "time":
        return _time_at(toks, i)
    if kind == "clock":
        return _clock_at(toks, i)
    if kind == "name":
        return _name_at(toks, i)
    if kind == "person":
        if tok.low in PERSON_NOUNS:
            return True
        if tok.low in TEAM_NOUNS:
            return i > 0 and toks[i - 1].low not in FUNCTION_WORDS  # "the platform team", not "the team"
        return _name_at(toks, i) and not _after_place_preposition(toks, i)
    if kind == "place":
        if _name_at(toks, i) and (edition < 2 or _place_name(toks, i)):
            return True
        if tok.low in FUNCTION_WORDS or tok.low in PLACE_PREPOSITIONS or _time_at(toks, i) or _number(toks, i):
            return False
        # A noun within three words after a place preposition, with only function words between.
        for j in range(max(0, i - 3), i):
            if toks[j].low in PLACE_PREPOSITIONS and all(toks[k].low in FUNCTION_WORDS for k in range(j + 1, i)):
                return True
        return False
    if kind == "frequency":
        if tok.low in FREQUENCY_WORDS:
            return True
        if not _number(toks, i):
            return False
        # "three times", "3 vezes"; "three sessions a week", "twice a day", "dos veces al mes", "2 por semana".
        after = [t.low for t in toks[i + 1 : i + 4]]
        if after[:1] and after[0] in _w("times vezes veces"):
            return True
        rate = after[1:] if after[:1] and after[0] not in _w("a per por al") else after
        return len(rate) >= 2 and rate[0] in _w("a per por al every each cada") and rate[1] in TIME_UNITS
    if kind == "code":
        return any(ch.isdigit() for ch in tok.text) and not _time_at(toks, i)
    if _IDENTIFIER.fullmatch(tok.text) and not _NUMBER_UNIT.fullmatch(tok.low):
        return False
    unit = toks[i + 1] if i + 1 < len(toks) else None
    if kind == "duration" and edition >= 3 and tok.low in ONE_UNIT and _is_unit(unit, TIME_UNITS | LENGTH_UNITS):
        return True  # "an hour and a half", "half a day"
    if not _number(toks, i) or _time_at(toks, i):
        return False
    if kind == "money":
        # "saving 210 a year" states an amount as surely as "210 euros"; "250 degrees", "two tins" (a count of
        # tins) and "8 por cento" (a share) do not.
        if _unit_after(toks, i, CURRENCY) or (i and toks[i - 1].text in CURRENCY_SIGNS):
            return True
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is not None and (nxt.low not in FUNCTION_WORDS or nxt.text == "%" or _percent_after(toks, i)):
            return False
        return not _age_at(toks, i)
    if kind == "duration":
        return _unit_after(toks, i, TIME_UNITS | LENGTH_UNITS)
    age = _age_at(toks, i)
    if kind == "age":
        return age or _unit_after(toks, i, _w("years year anos ano"))
    return not age  # count, quantity


def _percent_after(toks: list[_Tok], i: int) -> bool:
    """A share follows number ``i``: "8 %", "8 percent", "8 per cent", "8 por cento", "8 por ciento"."""
    nxt = [t.low for t in toks[i + 1 : i + 3]]
    return bool(nxt) and (
        nxt[0] in ("%", "percent")
        or (len(nxt) == 2 and nxt[0] in ("per", "por") and nxt[1] in ("cent", "cento", "ciento"))
    )


def _age_at(toks: list[_Tok], i: int) -> bool:
    """A number that is an age: after "turned", "aged", "fez"...; or before "years old", "anos", "años"."""
    if any(toks[j].low in AGE_BEFORE for j in range(max(0, i - 2), i)):
        return True
    nxt = [t.low for t in toks[i + 1 : i + 3]]
    return bool(nxt) and (nxt[0] in AGE_AFTER or (nxt[0] in ("years", "year") and nxt[1:2] == ["old"]))


def has_type(
    kind: str,
    text: str,
    question_terms: frozenset[str] = frozenset(),
    common: frozenset[str] = frozenset(),
    edition: int = EDITION,
) -> bool:
    """Whether ``text`` holds a token of ``kind`` that the question does not (``any`` always does)."""
    return kind == "any" or bool(typed_tokens(kind, text, question_terms, common, edition))


def lower_case_stems(*texts: str) -> frozenset[str]:
    """Stems of the words written in lower case in ``texts``: the ``common`` words of :func:`typed_tokens`."""
    return frozenset(stem(fold(w)) for t in texts for w in _LETTERS.findall(t) if w.islower())


#: Question words of every kind, and the words of "how much / many / long…": they say what is asked, not about what.
QUESTION_WORDS = (
    PERSON_WORDS
    | TIME_WORDS
    | PLACE_WORDS
    | WHICH_WORDS
    | _w("how much many long far old often quanto quanta quantos quantas cuanto cuanta cuantos cuantas")
)
#: Words that order notes in time ("first and now", "the latest"): which note, like a date, not what it says.
ORDER_WORDS = _w(
    "first last latest earliest previous original originally initially primeiro primeira ultimo ultima primero primera"
)


def topic_terms(question: str, kind: AnswerType) -> list[str]:
    """The question's topic: its content terms (terms rule 1) less what only says what is asked.

    Left out: question words and function words, the words of the answer type itself (money cues
    of a money question, the time, code, name and age nouns), words that date notes or order them
    in time (calendar words, quarters, four-digit years, present markers, "first", "latest"), the
    thing a "which X" question asks for (an answer names an X, it need not say "X"; unless the
    question says X again: "Which book did the book club choose?"), and single letters (the "s"
    of "Tom's").

    >>> topic_terms("How much did the new bicycle cost?", answer_type("How much did the new bicycle cost?"))
    ['new', 'bicycle']
    """
    cues = MONEY_CUES if kind.kind == "money" else frozenset()
    if kind.kind == "duration" and kind.edition >= 2:
        cues = DURATION_CUES  # "how long did the 5K take": the question's frame, not its topic
    drop = QUESTION_WORDS | ORDER_WORDS | CALENDAR | QUARTERS | PRESENT | cues | TIME_NOUNS | CODE_NOUNS | NAME_NOUNS
    drop |= AGE_NOUNS | FUNCTION_WORDS
    if kind.edition >= 3:
        drop |= KIND_NOUNS  # "what kind of dog": the dog is asked for, "kind" says how
    said = terms(question)
    return [
        t
        for t in content_terms(question)
        if t not in drop
        and (t != kind.noun or said.count(t) > 1)
        and not _YEAR.fullmatch(t)
        and (len(t) > 1 or t.isdigit())
    ]


#: Function words that only one of the three languages uses (folded): enough to tell a question's language.
LANGUAGE_WORDS = {
    "en": _w(
        "the of and is are was were did does do what which who where when how my our your to in on at for with i we"
    ),
    "pt": _w(
        "o os do da dos das na nas nos em pelo pela e sao meu minha nosso nossa voce nao um uma ao aos ela ele "
        "eles elas isso isto foi tem vai qual quais quem onde quando"
    ),
    "es": _w(
        "el los del al en es mi mis nuestro nuestra un una y se lo le les su sus fue cual cuales quien quienes "
        "donde cuando va"
    ),
}
#: Function words Portuguese and Spanish share, and English lacks.
IBERIAN_WORDS = _w("de que a para com con por como")


def question_language(question: str) -> str | None:
    """``"en"``, ``"pt"``, ``"es"``, ``"pt/es"`` (Iberian, either) or None (no function word to tell).

    >>> question_language("Where is it?"), question_language("Onde está o gato?"), question_language("¿Dónde está?")
    ('en', 'pt', 'es')
    """
    t = terms(question)
    count = {k: sum(w in v for w in t) for k, v in LANGUAGE_WORDS.items()}
    iberian = count["pt"] + count["es"] + sum(w in IBERIAN_WORDS for w in t)
    if count["en"] >= iberian:
        return "en" if count["en"] else None
    return "pt" if count["pt"] > count["es"] else "es" if count["es"] > count["pt"] else "pt/es"


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


#: Edition 1's lists (extractive-v4's), hashed as issue 40 first pinned them.
RULES_SHA256 = _sha256(
    {
        k: sorted(v)
        for k, v in {
            "person_words": PERSON_WORDS,
            "time_words": TIME_WORDS,
            "place_words": PLACE_WORDS,
            "lead_words": LEAD_WORDS,
            "which_words": WHICH_WORDS,
            "time_nouns": TIME_NOUNS,
            "place_nouns": PLACE_NOUNS,
            "code_nouns": CODE_NOUNS,
            "age_nouns": AGE_NOUNS,
            "money_nouns": MONEY_NOUNS,
            "name_nouns": NAME_NOUNS,
            "kind_nouns": KIND_NOUNS,
            "money_cues": MONEY_CUES,
            "currency": CURRENCY,
            "currency_signs": CURRENCY_SIGNS,
            "time_units": TIME_UNITS,
            "length_units": LENGTH_UNITS,
            "other_units": OTHER_UNITS,
            "age_before": AGE_BEFORE,
            "age_after": AGE_AFTER,
            "number_words": NUMBER_WORDS,
            "number_words_before_unit": NUMBER_WORDS_BEFORE_UNIT,
            "months": MONTHS,
            "months_capitalised": MONTHS_CAPITALISED,
            "weekdays": WEEKDAYS,
            "time_of_day": TIME_OF_DAY,
            "time_relative": TIME_RELATIVE,
            "place_prepositions": PLACE_PREPOSITIONS,
            "person_nouns": PERSON_NOUNS,
            "team_nouns": TEAM_NOUNS,
            "profession_nouns": PROFESSION_NOUNS,
            "clock_nouns": CLOCK_NOUNS,
            "day_parts": DAY_PARTS,
            "frequency_words": FREQUENCY_WORDS,
            "calendar": CALENDAR,
            "quarters": QUARTERS,
            "present": PRESENT,
            "question_words": QUESTION_WORDS,
            "order_words": ORDER_WORDS,
            "iberian_words": IBERIAN_WORDS,
            **{f"language_{k}": v for k, v in LANGUAGE_WORDS.items()},
            "function_words": FUNCTION_WORDS,
            "irregular_past": IRREGULAR_PAST,
            "note_verbs": NOTE_VERBS,
            "verb_endings": frozenset(VERB_ENDINGS),
        }.items()
    }
    | {"descriptions": DESCRIPTIONS}
)
#: Each edition's hash: edition 2 is edition 1's lists and its own additions.
EDITIONS = {
    1: RULES_SHA256,
    2: _sha256(
        {
            "edition_1": RULES_SHA256,
            "meals": sorted(MEALS),
            "meal_prepositions": sorted(MEAL_PREPOSITIONS),
            "directions": sorted(DIRECTIONS),
            "place_name_nouns": sorted(PLACE_NAME_NOUNS),
            "duration_cues": sorted(DURATION_CUES),
            "rules": ["meal time", "place names read as places", "what is X's name", "duration cues"],
        }
    ),
}
EDITIONS[3] = _sha256(
    {
        "edition_2": EDITIONS[2],
        "ordinal_words": sorted(ORDINAL_WORDS),
        "one_unit": sorted(ONE_UNIT),
        "rules": ["ordinals are no names", "a unit after a/an/half is a duration", "kind nouns are no topic"],
    }
)
